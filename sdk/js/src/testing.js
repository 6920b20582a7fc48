// The native test harness: a policy's logic unit-tested with `node --test`, no
// component built.
//
// - Fixtures: `node`, `job`, `distributed`, `snapshot` (every bound task's requests
//   charged to its node, as the host reports them) and `onlyOn` (an eligibility set).
// - `delta(before, after)`: the change the host would send a kept instance holding
//   `before` (the host's rules: changed items whole, removed ones by name, loss series
//   that moved on as loss updates, a reset when the order rule cannot say it);
//   `withoutLoss(s)`: the snapshot as a policy that reads no loss receives it.
// - `Harness`: runs a policy through the same binding the component exports, round
//   after round on one kept instance fed deltas, and checks every round against a fresh
//   instance given the whole snapshot: a policy that keeps anything between calls
//   outside its state blob fails its tests rather than the cluster. A policy whose
//   `readsLoss` is false is sent what the host would send it: every loss series empty.
//
//     import { Harness, job, node, snapshot } from './switchyard-sdk/src/testing.js';
//     test('a job goes to the emptier node', () => {
//       const h = new Harness(new LeastLoaded());
//       const d = h.decide(snapshot(0, [node('busy', 4000, { used: 3000 }), node('idle', 4000)], [job('a')]));
//       assert.deepEqual(h.placements(d), { a: { main: 'idle' } });
//     });
//
// This module runs under Node only (it uses `node:util`); a component never imports it.

import { isDeepStrictEqual } from 'node:util';

import { exportPolicy } from './binding.js';
import { ONE_TASK_PER_NODE_LABEL, plus } from './cluster.js';
import { PolicyError } from './contract.js';

export const GIB = 2 ** 30;

/** Resources: 1 CPU and 1 GiB unless given. */
export const res = (cpuMillis = 1000, memoryBytes = GIB, gpus = 0) => ({ cpuMillis, memoryBytes, gpus });

/** A node offering the given resources, `used` millicores of it requested by tasks the
 * snapshot does not show (another scheduler's). */
export function node(name, cpuMillis = 8000, { memoryBytes = 32 * GIB, gpus = 0, used = 0, schedulable = true, labels = {} } = {}) {
  return {
    name,
    allocatable: res(cpuMillis, memoryBytes, gpus),
    requested: res(used, 0, 0),
    usage: undefined,
    labels: Object.entries(labels).map(([key, value]) => ({ key, value })),
    schedulable,
  };
}

const task = (name, role, requests, on) => ({
  name,
  role,
  node: on,
  phase: on ? 'running' : 'pending',
  requests: { ...requests },
  cpuWeight: 1,
  usage: undefined,
  eligible: undefined,
});

/** A single-task job (task `main`, 1 CPU and 1 GiB unless `requests` says), waiting, or
 * running on `on`; `loss` as [time, value] pairs, oldest first. */
export function job(id, requests = res(), { on, submitted = 0, priority = 0, loss = [], labels = {}, oneTaskPerNode = false } = {}) {
  const tasks = [task('main', 'main', requests, on)];
  const replicas = { role: 'main', current: 1, min: 1, max: 1 };
  return makeJob(id, tasks, replicas, { submitted, priority, loss, labels, oneTaskPerNode });
}

/** A parameter-server job: `ps` tasks `ps-i` and `workers` tasks `worker-i`, all waiting
 * or all running on `on`; workers scale between 1 and `maxWorkers`. */
export function distributed(id, ps, workers, { requests = res(), on, maxWorkers, submitted = 0, loss = [], oneTaskPerNode = false } = {}) {
  const tasks = [];
  for (let i = 0; i < ps; i += 1) tasks.push(task(`ps-${i}`, 'ps', requests, on));
  for (let i = 0; i < workers; i += 1) tasks.push(task(`worker-${i}`, 'worker', requests, on));
  const replicas = { role: 'worker', current: workers, min: 1, max: maxWorkers ?? workers };
  return makeJob(id, tasks, replicas, { submitted, priority: 0, loss, labels: {}, oneTaskPerNode });
}

function makeJob(id, tasks, replicas, { submitted, priority, loss, labels, oneTaskPerNode }) {
  const running = tasks.some((t) => t.node);
  const allLabels = Object.entries(labels).map(([key, value]) => ({ key, value }));
  if (oneTaskPerNode) allLabels.push({ key: ONE_TASK_PER_NODE_LABEL, value: 'true' });
  return {
    id,
    phase: running ? 'running' : 'waiting',
    submitTime: submitted,
    startTime: running ? submitted : undefined,
    priority,
    utility: 1,
    tasks,
    replicas,
    loss: lossSeries(loss),
    metricRises: false,
    moves: [],
    checkpointable: true,
    labels: allLabels,
  };
}

/** A loss series of `[time, value]` points, oldest first, at steps 0, 1, 2... */
export function lossSeries(points = []) {
  return { times: points.map((p) => p[0]), steps: points.map((_, step) => step), values: points.map((p) => p[1]) };
}

/** The loss updates of a change in which no loss series moved. */
export function noLossUpdates() {
  return { jobs: [], dropped: [], appended: [], samples: lossSeries() };
}

/** A snapshot at `time` (a `tick` unless `triggers` says), with every bound task's
 * requests added to its node's `requested`, as the host reports it. */
export function snapshot(time, nodes, jobs, triggers = [{ tag: 'tick' }]) {
  nodes = structuredClone(nodes);
  const byName = new Map(nodes.map((n) => [n.name, n]));
  for (const j of jobs) {
    for (const t of j.tasks) {
      const n = byName.get(t.node);
      if (n) n.requested = plus(n.requested, t.requests);
    }
  }
  return { time, triggers: [...triggers], nodes, jobs: [...jobs], nodeSets: [] };
}

/** Every task of `jobId` may run only on `nodes` (a new eligibility set, as the host
 * sends for a node selector or an untolerated taint). */
export function onlyOn(s, jobId, nodes) {
  const id = s.nodeSets.length;
  const positions = [];
  s.nodes.forEach((n, at) => {
    if (nodes.includes(n.name)) positions.push(at);
  });
  s.nodeSets.push({ id, nodes: positions });
  const target = s.jobs.find((j) => j.id === jobId);
  if (target === undefined) throw new Error(`no job \`${jobId}\` in the snapshot`);
  for (const t of target.tasks) t.eligible = id;
  return s;
}

/** `s` as the host sends it to a policy that reads no loss (`readsLoss` false): every
 * job's loss series empty, the rest as it is (the jobs are copies; the nodes and tasks
 * are shared with `s`). */
export function withoutLoss(s) {
  return { ...s, jobs: s.jobs.map((j) => ({ ...j, loss: lossSeries() })) };
}

/** The whole snapshot as a reset: what a fresh instance receives (every loss series
 * empty unless the policy `readsLoss`). */
export function resetOf(s, readsLoss = true) {
  if (!readsLoss) s = withoutLoss(s);
  return {
    reset: true,
    time: s.time,
    triggers: [...s.triggers],
    nodes: [...s.nodes],
    removedNodes: [],
    jobs: [...s.jobs],
    removedJobs: [],
    lossUpdates: noLossUpdates(),
    nodeSets: [...s.nodeSets],
  };
}

/** The keys of the held items that left, or undefined when the order rule (held items
 * keep their places, new ones follow) cannot say how `held` became `now`. */
function removedKeys(held, now, key) {
  const nowKeys = now.map(key);
  const heldKeys = held.map(key);
  if (new Set(nowKeys).size !== nowKeys.length || new Set(heldKeys).size !== heldKeys.length) return undefined;
  const present = new Set(nowKeys);
  const kept = heldKeys.filter((k) => present.has(k));
  if (!isDeepStrictEqual(nowKeys.slice(0, kept.length), kept)) return undefined;
  return heldKeys.filter((k) => !present.has(k));
}

/** A loss series as `[time, step, value]` triples. */
const samplesOf = (series) => series.times.map((time, i) => [time, series.steps[i], series.values[i]]);

/** The fewest oldest samples to drop from `old` so that what is left starts `now`. */
function lossShift(old, now) {
  for (let d = 0; d <= old.length; d += 1) {
    const rest = old.slice(d);
    if (rest.length <= now.length && isDeepStrictEqual(rest, now.slice(0, rest.length))) return d;
  }
  return old.length;
}

/** The change the host sends an instance holding `before` to bring it to `after`. For a
 * policy that reads no loss the host leaves loss series out of both: no loss updates,
 * and a job whose only change is its loss series is not sent. */
export function delta(before, after, readsLoss = true) {
  if (!readsLoss) {
    before = before == null ? before : withoutLoss(before);
    after = withoutLoss(after);
  }
  if (before == null) return resetOf(after);
  const removedNodes = removedKeys(before.nodes, after.nodes, (n) => n.name);
  const removedJobs = removedKeys(before.jobs, after.jobs, (j) => j.id);
  if (removedNodes === undefined || removedJobs === undefined) return resetOf(after);
  const oldNodes = new Map(before.nodes.map((n) => [n.name, n]));
  const nodes = after.nodes.filter((n) => !isDeepStrictEqual(oldNodes.get(n.name), n));
  const oldJobs = new Map(before.jobs.map((j) => [j.id, j]));
  const jobs = [];
  const lossUpdates = noLossUpdates();
  const { samples } = lossUpdates;
  after.jobs.forEach((j, at) => {
    const old = oldJobs.get(j.id);
    if (isDeepStrictEqual(old, j)) return;
    if (old === undefined || !isDeepStrictEqual({ ...old, loss: null }, { ...j, loss: null })) {
      jobs.push(j);
      return;
    }
    const was = samplesOf(old.loss);
    const now = samplesOf(j.loss);
    const dropped = lossShift(was, now);
    const kept = was.length - dropped;
    lossUpdates.jobs.push(at);
    lossUpdates.dropped.push(dropped);
    lossUpdates.appended.push(now.length - kept);
    samples.times.push(...j.loss.times.slice(kept));
    samples.steps.push(...j.loss.steps.slice(kept));
    samples.values.push(...j.loss.values.slice(kept));
  });
  // Sets name nodes by position: a node leaving moves the positions after it.
  const setsChanged =
    !isDeepStrictEqual(before.nodeSets, after.nodeSets) || (after.nodeSets.length > 0 && removedNodes.length > 0);
  return {
    reset: false,
    time: after.time,
    triggers: [...after.triggers],
    nodes,
    removedNodes,
    jobs,
    removedJobs,
    lossUpdates,
    nodeSets: setsChanged ? [...after.nodeSets] : undefined,
  };
}

/** Runs a policy round after round as the host would: `configure` first, then each
 * `decide` on one kept instance fed the delta from the previous round's snapshot. Every
 * round is also decided by a fresh instance (`new policy.constructor()`) given the whole
 * snapshot and the same state; a difference fails the test, since the host may start a
 * fresh instance at any time. The state the policy returns is handed to the next round
 * unless a test passes its own.
 *
 * A refusal comes back as `PolicyError`, with the operator's message. */
export class Harness {
  /** @param {import('./policy.js').Policy} policy @param {Record<string, string>} settings */
  constructor(policy, settings = {}) {
    this.policy = policy;
    this.settings = Object.entries(settings).map(([name, value]) => ({ name, value }));
    this.kept = exportPolicy(policy);
    this.held = undefined;
    this.state = new Uint8Array();
  }

  /** The effective settings, as `policy inspect` and the controller see them. */
  configure() {
    const effective = unwrap(() => this.kept.configure(structuredClone(this.settings)));
    return Object.fromEntries(effective.map((s) => [s.name, s.value]));
  }

  /** One round on `s` (without its loss series when the policy reads none); the
   * snapshot is copied, so a test may change and reuse it. */
  decide(s, state = undefined) {
    s = structuredClone(s);
    if (!this.kept.describe().readsLoss) s = withoutLoss(s);
    const given = state ?? this.state;
    const change = delta(this.held, s);
    const kept = unwrap(() => this.kept.decide(structuredClone(this.settings), structuredClone(change), given.slice()));
    const freshPolicy = new this.policy.constructor();
    const fresh = unwrap(() =>
      exportPolicy(freshPolicy).decide(structuredClone(this.settings), resetOf(structuredClone(s)), given.slice()),
    );
    if (!isDeepStrictEqual(kept, fresh)) {
      throw new Error(
        `${this.policy.name} decided differently on a kept instance than on a fresh one at t=${s.time}: ` +
          `does it keep something between calls outside its state?\n` +
          `kept:  ${JSON.stringify(kept)}\nfresh: ${JSON.stringify(fresh)}`,
      );
    }
    this.held = s;
    this.state = kept.state;
    return kept;
  }

  /** Job -> task -> node of every placement in `d`. */
  placements(d) {
    const found = {};
    for (const a of d.actions) {
      if (a.op.tag === 'place') {
        found[a.op.val.job] = Object.fromEntries(a.op.val.assignments.map((x) => [x.task, x.node]));
      }
    }
    return found;
  }

  /** The jobs `d` leaves waiting. */
  waiting(d) {
    return d.actions.filter((a) => a.op.tag === 'wait').map((a) => a.op.val);
  }
}

/** The call's result, with the binding's WIT error turned back into `PolicyError`. */
function unwrap(call) {
  try {
    return call();
  } catch (error) {
    if (error !== null && typeof error === 'object' && 'payload' in error && !(error instanceof Error)) {
      throw new PolicyError(error.payload);
    }
    throw error;
  }
}
