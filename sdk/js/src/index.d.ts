// Types of the JavaScript SDK: the contract's records as componentize-js passes them
// (camelCase fields, enums as kebab-case strings, variants as `{ tag, val }`, `option`
// as `undefined`), with the u64 amounts as numbers (the SDK converts them where they
// enter the held snapshot), and the SDK's own API. The WIT (`wit/policy.wit`) is the
// source of truth; these mirror it.

export interface Resources {
  /** CPU in millicores (1000 = one core). */
  cpuMillis: number;
  /** Memory in bytes. */
  memoryBytes: number;
  /** Whole GPUs. */
  gpus: number;
}

export interface Label {
  key: string;
  value: string;
}

/** A machine that can run tasks. */
export interface Node {
  name: string;
  /** What the node offers to tasks. */
  allocatable: Resources;
  /** Sum of the requests of the tasks bound to it (any job, any scheduler). */
  requested: Resources;
  /** Measured usage, when the cluster reports it. */
  usage?: Resources;
  labels: Label[];
  /** False when the node is cordoned or not ready: place nothing new there. */
  schedulable: boolean;
}

export type TaskPhase = 'pending' | 'running' | 'restarting';

/** One process of a job. */
export interface Task {
  /** Unique within its job, e.g. `worker-1`. */
  name: string;
  role: string;
  /** The node it is bound to, if any. */
  node?: string;
  phase: TaskPhase;
  requests: Resources;
  /** Relative CPU share under contention, in (0, 1]. */
  cpuWeight: number;
  usage?: Resources;
  /** The `id` of the `nodeSets` entry it may run on; undefined: any node. */
  eligible?: number;
}

/** A job's recent evaluations, oldest first, as three columns of one length:
 * evaluation `i` is (`times[i]`, `steps[i]`, `values[i]`). Held as plain arrays; the
 * host's delta carries them as typed arrays, which the SDK converts. */
export interface LossSeries {
  /** When each value was taken: seconds on the host's clock. */
  times: number[];
  /** The training step each value belongs to. */
  steps: number[];
  /** The evaluation values (loss, error rate, or a metric that rises). */
  values: number[];
}

export interface Replicas {
  role: string;
  current: number;
  min: number;
  max: number;
}

export type JobPhase = 'waiting' | 'running' | 'restarting';
export type MoveKind = 'placed' | 'migrated' | 'rescaled' | 'preempted';

export interface JobMove {
  time: number;
  kind: MoveKind;
  purpose: string;
  fromNodes: string[];
  toNodes: string[];
}

/** A training job not yet finished. */
export interface Job {
  id: string;
  phase: JobPhase;
  submitTime: number;
  startTime?: number;
  priority: number;
  utility: number;
  tasks: Task[];
  replicas: Replicas;
  /** Recent evaluations, oldest first. */
  loss: LossSeries;
  metricRises: boolean;
  moves: JobMove[];
  checkpointable: boolean;
  labels: Label[];
}

export interface NodeSet {
  id: number;
  /** Positions in `snapshot.nodes`. */
  nodes: number[];
}

export type Trigger =
  | { tag: 'tick' }
  | { tag: 'job-arrived'; val: string }
  | { tag: 'job-finished'; val: string }
  | { tag: 'node-changed'; val: string }
  | { tag: 'job-preempted'; val: string };

/** Everything the policy may look at in one call. */
export interface Snapshot {
  time: number;
  triggers: Trigger[];
  nodes: Node[];
  jobs: Job[];
  nodeSets: NodeSet[];
}

/** A loss series as the host sends it (typed arrays; plain arrays in native tests). */
export interface LossSeriesWire {
  times: Float64Array | number[];
  steps: BigUint64Array | number[];
  values: Float64Array | number[];
}

/** The loss series of otherwise unchanged jobs that moved on, as columns: the job at
 * position `jobs[k]` dropped its oldest `dropped[k]` evaluations and gained the next
 * `appended[k]` of `samples`. */
export interface LossUpdates {
  /** Positions in the held job list once removals are applied, increasing. */
  jobs: Uint32Array | number[];
  dropped: Uint32Array | number[];
  appended: Uint32Array | number[];
  samples: LossSeriesWire;
}

/** The cluster as a change to what the instance held (`incremental-scheduler`). */
export interface SnapshotDelta {
  reset: boolean;
  time: number;
  triggers: Trigger[];
  nodes: Node[];
  removedNodes: string[];
  jobs: Job[];
  removedJobs: string[];
  lossUpdates: LossUpdates;
  nodeSets?: NodeSet[];
}

export interface Assignment {
  task: string;
  node: string;
}

export type Operation =
  | { tag: 'place'; val: { job: string; assignments: Assignment[] } }
  | { tag: 'migrate'; val: { job: string; task?: string; node: string; purpose: string } }
  | { tag: 'set-cpu-weight'; val: { job: string; task: string; weight: number } }
  | { tag: 'scale'; val: { job: string; replicas: number; nodes: string[] } }
  | { tag: 'wait'; val: string }
  | { tag: 'preempt'; val: string };

export interface Action {
  op: Operation;
  /** Shown to the operator. */
  reason: string;
}

export interface JobLabel {
  job: string;
  key: string;
  value: string;
}

/** The policy's answer to one call. */
export interface Decision {
  actions: Action[];
  labels: JobLabel[];
  nextCallAfter?: number;
  state: Uint8Array;
}

export interface Setting {
  name: string;
  value: string;
}

export interface Description {
  name: string;
  version: string;
  summary: string;
  parameters: { name: string; defaultValue: string; doc: string }[];
  /** Whether the policy reads jobs' loss series: false, and every series comes empty. */
  readsLoss: boolean;
}

/** One parameter a policy accepts. */
export interface ParamSpec {
  name: string;
  default: string;
  doc: string;
}

/** A refusal the operator reads; any other exception traps the call. */
export class PolicyError extends Error {
  constructor(message: string);
}

/** Settings resolved against a spec. */
export class Settings {
  static resolve(spec: ParamSpec[], given: Setting[]): Settings;
  toSettings(): Setting[];
  text(name: string): string;
  float(name: string): number;
  floatIn(name: string, low: number, high: number): number;
  bool(name: string): boolean;
  choice<T extends string>(name: string, allowed: readonly T[]): T;
}

/** Where a task may go, as `Ledger.roomsFor` offers it. */
export interface Room {
  name: string;
  at: number;
  allocatable: Resources;
  free: Resources;
}

/** Free capacity per node, charged as the policy places tasks within one round. */
export class Ledger {
  static of(snapshot: Snapshot): Ledger;
  constructor(nodes: Node[], nodeSets?: NodeSet[]);
  readonly names: string[];
  readonly allocatable: Resources[];
  readonly schedulable: boolean[];
  cpu: Float64Array;
  memory: Float64Array;
  gpus: Float64Array;
  readonly nodeCount: number;
  copy(): Ledger;
  emptied(): Ledger;
  position(node: string): number | undefined;
  free(node: string): Resources | undefined;
  freeAt(at: number): Resources;
  allows(task: Task, at: number): boolean;
  fitsAt(at: number, request: Resources): boolean;
  fits(node: string, request: Resources): boolean;
  fitsTask(node: string, task: Task): boolean;
  mayRun(node: string, task: Task): boolean;
  positionsFor(task: Task): number[];
  nodesFor(task: Task): string[];
  roomsFor(task: Task): Room[];
  leastAllocatedScore(node: string, request: Resources): number;
  charge(node: string, request: Resources): boolean;
  chargeTask(node: string, task: Task): boolean;
  chargeTasks(node: string, tasks: Task[]): boolean;
  release(node: string, request: Resources): void;
  packGang(tasks: Task[]): Assignment[] | undefined;
  packGangOf(job: Job, tasks: Task[]): Assignment[] | undefined;
}

export const ONE_TASK_PER_NODE_LABEL: 'switchyard.dev/one-task-per-node';
export function zero(): Resources;
export function plus(a: Resources, b: Resources): Resources;
export function minus(a: Resources, b: Resources): Resources;
export function covers(a: Resources, b: Resources): boolean;
export function freeOf(node: Node): Resources;
export function oneTaskPerNode(job: Job): boolean;
export function pendingTasks(job: Job): Task[];
export function totalRequests(tasks: Task[]): Resources;
export function nodesOf(job: Job): string[];
export function leastAllocatedScore(allocatable: Resources, free: Resources, request: Resources): number;

/** One round's snapshot, with cached views of it. */
export class Cluster {
  readonly snapshot: Snapshot;
  readonly time: number;
  readonly triggers: Trigger[];
  readonly nodes: Node[];
  readonly jobs: Job[];
  readonly nodeSets: NodeSet[];
  waiting(): [Job, Task[]][];
  ledger(): Ledger;
}

/** A scheduling policy: subclass it, set the fields and implement `decide`. */
export class Policy {
  name: string;
  version: string;
  summary: string;
  parameters: ParamSpec[];
  /** Whether it reads jobs' loss series (true unless it says otherwise). */
  readsLoss: boolean;
  describe(): Description;
  check(settings: Settings): void;
  decide(settings: Settings, cluster: Cluster, state: Uint8Array): Decision;
}

/** The `incremental-scheduler` interface, as componentize-js expects it exported. */
export interface IncrementalScheduler {
  describe(): Description;
  configure(settings: Setting[]): Setting[];
  decide(settings: Setting[], change: SnapshotDelta, state: Uint8Array): Decision;
}

export function exportPolicy(policy: Policy): IncrementalScheduler;

export function place(job: string, assignments: Assignment[], reason: string): Action;
export function wait(job: string, reason: string): Action;
export function migrate(job: string, node: string, reason: string, options?: { task?: string; purpose?: string }): Action;
export function setCpuWeight(job: string, task: string, weight: number, reason: string): Action;
export function scale(job: string, replicas: number, nodes: string[], reason: string): Action;
export function preempt(job: string, reason: string): Action;
export function label(job: string, key: string, value: string): JobLabel;
export function decision(
  actions: Action[],
  state?: Uint8Array,
  options?: { labels?: JobLabel[]; nextCallAfter?: number },
): Decision;

export const Normalisation: { readonly INITIAL: 'initial'; readonly MAX: 'max' };
export type Normalisation = 'initial' | 'max';
export function parseNormalisation(word: string): Normalisation | undefined;
export class Scale {
  constructor(base?: number);
  base: number | undefined;
  observe(mode: Normalisation, samples: LossSeries): void;
  normalise(value: number): number | undefined;
  toJSON(): number | null;
  static fromJSON(value: number | null | undefined): Scale;
}
export function valueAt(samples: LossSeries, time: number): number | undefined;
export function gain(scale: Scale, samples: LossSeries, since: number, now: number): number | undefined;

export namespace state {
  function encode(value: unknown): Uint8Array;
  function decode<T>(blob: Uint8Array, fallback: () => T): T;
}

export namespace log {
  const captured: { level: 'trace' | 'debug' | 'info' | 'warn' | 'error'; message: string }[];
  function trace(message: string): void;
  function debug(message: string): void;
  function info(message: string): void;
  function warn(message: string): void;
  function error(message: string): void;
}
