// Views of the snapshot that placement decisions need: free resources per node, which
// nodes fit a task, and packing a gang onto the fewest nodes.
//
// A `Ledger` starts from the snapshot and is charged as the policy decides, so two
// placements in one round never count the same free capacity twice (the host would
// reject the second). It also knows where each task may run (`task.eligible`, the
// host's eligibility sets): the helpers that take a task (`fitsTask`, `roomsFor`,
// `chargeTask`, `packGang`) never offer a node outside the task's set, so a policy built
// on them honours taints, node selectors and affinity without knowing they exist. The
// rules are those of the Rust SDK's `cluster` module.
//
// Free capacities are kept in typed arrays indexed by node position rather than as
// resource objects: a round on a thousand nodes then allocates nothing per node, and a
// trial copy for all-or-nothing packing is three array copies. Float64 holds every
// integer below 2^53 exactly.

/** The job label the host sets (value `true`) when no two of a job's tasks may share a
 * node (required anti-affinity against its own pods per node, or a host port); the
 * host refuses a decision that puts two of them on one. */
export const ONE_TASK_PER_NODE_LABEL = 'switchyard.dev/one-task-per-node';

export const zero = () => ({ cpuMillis: 0, memoryBytes: 0, gpus: 0 });

export const plus = (a, b) => ({
  cpuMillis: a.cpuMillis + b.cpuMillis,
  memoryBytes: a.memoryBytes + b.memoryBytes,
  gpus: a.gpus + b.gpus,
});

/** `a - b`, floored at zero in each resource. */
export const minus = (a, b) => ({
  cpuMillis: Math.max(a.cpuMillis - b.cpuMillis, 0),
  memoryBytes: Math.max(a.memoryBytes - b.memoryBytes, 0),
  gpus: Math.max(a.gpus - b.gpus, 0),
});

/** Every resource of `b` is at most `a`'s: `b` fits in `a`. */
export const covers = (a, b) => a.cpuMillis >= b.cpuMillis && a.memoryBytes >= b.memoryBytes && a.gpus >= b.gpus;

/** What the node still offers: allocatable minus requested, as the snapshot says. */
export const freeOf = (node) => minus(node.allocatable, node.requested);

/** Whether no two tasks of `job` may share a node (`ONE_TASK_PER_NODE_LABEL`). */
export const oneTaskPerNode = (job) => job.labels.some((l) => l.key === ONE_TASK_PER_NODE_LABEL && l.value === 'true');

/** The tasks of `job` not yet on a node. */
export const pendingTasks = (job) => job.tasks.filter((t) => t.node == null && t.phase === 'pending');

/** Sum of the requests of `tasks`. */
export const totalRequests = (tasks) => tasks.reduce((total, t) => plus(total, t.requests), zero());

/** Names of the nodes `job` has tasks on, without repeats, in task order. */
export function nodesOf(job) {
  const seen = [];
  for (const task of job.tasks) {
    if (task.node != null && !seen.includes(task.node)) seen.push(task.node);
  }
  return seen;
}

const ratio = (part, whole) => (whole <= 0 ? 0 : part / whole);

/** kube-scheduler's `LeastAllocated` score (0-100) of a node with `free` of
 * `allocatable` after placing `request` there: the mean over CPU, memory (and GPUs when
 * the node has any) of the free fraction left. */
export function leastAllocatedScore(allocatable, free, request) {
  const left = minus(free, request);
  const cpu = ratio(left.cpuMillis, allocatable.cpuMillis);
  const memory = ratio(left.memoryBytes, allocatable.memoryBytes);
  if (allocatable.gpus > 0) return (100 * (cpu + memory + ratio(left.gpus, allocatable.gpus))) / 3;
  return (100 * (cpu + memory)) / 2;
}

/** Free capacity per node, charged as the policy places tasks within one round. */
export class Ledger {
  /** Free capacity as the snapshot reports it, and its eligibility sets. */
  static of(snapshot) {
    return new Ledger(snapshot.nodes, snapshot.nodeSets);
  }

  constructor(nodes, nodeSets = []) {
    const count = nodes.length;
    /** Node names by position. */
    this.names = nodes.map((n) => n.name);
    this.positions = new Map();
    this.names.forEach((name, at) => {
      if (!this.positions.has(name)) this.positions.set(name, at);
    });
    /** What each node offers, by position. */
    this.allocatable = nodes.map((n) => n.allocatable);
    this.schedulable = nodes.map((n) => n.schedulable);
    /** Free CPU (millicores), memory (bytes) and GPUs by position. */
    this.cpu = new Float64Array(count);
    this.memory = new Float64Array(count);
    this.gpus = new Float64Array(count);
    nodes.forEach((n, at) => {
      this.cpu[at] = Math.max(n.allocatable.cpuMillis - n.requested.cpuMillis, 0);
      this.memory[at] = Math.max(n.allocatable.memoryBytes - n.requested.memoryBytes, 0);
      this.gpus[at] = Math.max(n.allocatable.gpus - n.requested.gpus, 0);
    });
    // Set id -> its node positions; a set the host did not send allows nothing, as the
    // host's validator would refuse it too.
    this.sets = new Map(nodeSets.map((s) => [s.id, new Set(s.nodes)]));
    this.inOrder = new Map(nodeSets.map((s) => [s.id, [...new Set(s.nodes)].sort((a, b) => a - b)]));
  }

  /** An independent ledger with the same charges (the names and sets are shared: they
   * never change within a round). */
  copy() {
    const other = Object.create(Ledger.prototype);
    Object.assign(other, this);
    other.cpu = this.cpu.slice();
    other.memory = this.memory.slice();
    other.gpus = this.gpus.slice();
    return other;
  }

  /** The same nodes with nothing charged: whether a job could ever fit. */
  emptied() {
    const other = this.copy();
    this.allocatable.forEach((a, at) => {
      other.cpu[at] = a.cpuMillis;
      other.memory[at] = a.memoryBytes;
      other.gpus[at] = a.gpus;
    });
    return other;
  }

  get nodeCount() {
    return this.names.length;
  }

  /** The node's position in the snapshot, or undefined for an unknown node. */
  position(node) {
    return this.positions.get(node);
  }

  /** What is still free on `node`, or undefined for an unknown node. */
  free(node) {
    const at = this.positions.get(node);
    return at === undefined ? undefined : this.freeAt(at);
  }

  /** What is still free on the node at position `at`. */
  freeAt(at) {
    return { cpuMillis: this.cpu[at], memoryBytes: this.memory[at], gpus: this.gpus[at] };
  }

  /** True when `task` may run on the node at position `at` (its eligibility set). */
  allows(task, at) {
    if (task.eligible == null) return true;
    const allowed = this.sets.get(task.eligible);
    return allowed !== undefined && allowed.has(at);
  }

  /** True when the node at `at` is schedulable with room for `request`. */
  fitsAt(at, request) {
    return (
      this.schedulable[at] &&
      this.cpu[at] >= request.cpuMillis &&
      this.memory[at] >= request.memoryBytes &&
      this.gpus[at] >= request.gpus
    );
  }

  /** True when `node` is schedulable with room for `request`. Knows nothing of where a
   * task may run: for a task, `fitsTask`. */
  fits(node, request) {
    const at = this.positions.get(node);
    return at !== undefined && this.fitsAt(at, request);
  }

  /** True when `task` may run on `node` and the node has room for it. */
  fitsTask(node, task) {
    const at = this.positions.get(node);
    return at !== undefined && this.allows(task, at) && this.fitsAt(at, task.requests);
  }

  /** True when `task` may run on `node`, whatever is free there. */
  mayRun(node, task) {
    if (task.eligible == null) return true;
    const at = this.positions.get(node);
    return at !== undefined && this.allows(task, at);
  }

  /** Positions of the nodes `task` may run on with room for it, in snapshot order. */
  positionsFor(task) {
    const { cpuMillis, memoryBytes, gpus } = task.requests;
    const { cpu, memory, gpus: free, schedulable } = this;
    const found = [];
    const check = (at) => {
      if (schedulable[at] && cpu[at] >= cpuMillis && memory[at] >= memoryBytes && free[at] >= gpus) found.push(at);
    };
    if (task.eligible == null) {
      for (let at = 0; at < cpu.length; at += 1) check(at);
    } else {
      for (const at of this.inOrder.get(task.eligible) ?? []) if (at < cpu.length) check(at);
    }
    return found;
  }

  /** Names of the nodes `task` may run on with room for it, in snapshot order. */
  nodesFor(task) {
    return this.positionsFor(task).map((at) => this.names[at]);
  }

  /** The nodes `task` may run on with room for it: `{ name, at, allocatable, free }`. */
  roomsFor(task) {
    return this.positionsFor(task).map((at) => ({
      name: this.names[at],
      at,
      allocatable: this.allocatable[at],
      free: this.freeAt(at),
    }));
  }

  /** `leastAllocatedScore` of `node` after taking `request`; 0 for an unknown node. */
  leastAllocatedScore(node, request) {
    const at = this.positions.get(node);
    return at === undefined ? 0 : leastAllocatedScore(this.allocatable[at], this.freeAt(at), request);
  }

  /** Charges `request` to `node`; false (and nothing charged) when it does not fit.
   * Knows nothing of where a task may run: for a task, `chargeTask`. */
  charge(node, request) {
    const at = this.positions.get(node);
    if (at === undefined || !this.fitsAt(at, request)) return false;
    take(this, at, request);
    return true;
  }

  /** Charges `task`'s requests to `node`; false when it may not run there or does not
   * fit. */
  chargeTask(node, task) {
    return this.mayRun(node, task) && this.charge(node, task.requests);
  }

  /** Charges every one of `tasks` to `node`, or nothing (false) when they do not all fit
   * there together or one may not run there. */
  chargeTasks(node, tasks) {
    const at = this.positions.get(node);
    if (at === undefined || !this.schedulable[at]) return false;
    if (!tasks.every((t) => this.allows(t, at))) return false;
    const total = totalRequests(tasks);
    if (!this.fitsAt(at, total)) return false;
    take(this, at, total);
    return true;
  }

  /** Gives `request` back to `node` (a task leaving it), up to what it offers. */
  release(node, request) {
    const at = this.positions.get(node);
    if (at === undefined) return;
    const offered = this.allocatable[at];
    this.cpu[at] = Math.min(this.cpu[at] + request.cpuMillis, offered.cpuMillis);
    this.memory[at] = Math.min(this.memory[at] + request.memoryBytes, offered.memoryBytes);
    this.gpus[at] = Math.min(this.gpus[at] + request.gpus, offered.gpus);
  }

  /** Packs `tasks` onto as few nodes as possible: repeatedly fill the node that can take
   * the most of the remaining tasks (ties: snapshot order), each task only on a node it
   * may run on. All or nothing: on success the ledger is charged and the assignments
   * (`{ task, node }`) returned; on failure nothing changes and the answer is
   * undefined. */
  packGang(tasks) {
    const trial = this.copy();
    let remaining = [...tasks];
    const assignments = [];
    while (remaining.length) {
      let bestAt = -1;
      let bestCount = 0;
      for (let at = 0; at < trial.names.length; at += 1) {
        const count = howManyFit(trial, at, remaining);
        if (count > bestCount) {
          bestAt = at;
          bestCount = count;
          if (count === remaining.length) break;
        }
      }
      if (bestAt < 0) return undefined;
      const left = [];
      for (const task of remaining) {
        if (trial.allows(task, bestAt) && trial.fitsAt(bestAt, task.requests)) {
          take(trial, bestAt, task.requests);
          assignments.push({ task: task.name, node: trial.names[bestAt] });
        } else {
          left.push(task);
        }
      }
      remaining = left;
    }
    adopt(this, trial);
    return assignments;
  }

  /** `packGang` for the pending `tasks` of `job`, except that a job whose tasks may not
   * share a node (`oneTaskPerNode`) goes one task to a node, each on a node none of its
   * tasks is on yet (first fit, in snapshot order). All or nothing. */
  packGangOf(job, tasks) {
    if (!oneTaskPerNode(job)) return this.packGang(tasks);
    const taken = new Set(nodesOf(job).map((n) => this.positions.get(n)).filter((at) => at !== undefined));
    const trial = this.copy();
    const assignments = [];
    for (const task of tasks) {
      let found = -1;
      for (let at = 0; at < trial.names.length; at += 1) {
        if (!taken.has(at) && trial.allows(task, at) && trial.fitsAt(at, task.requests)) {
          found = at;
          break;
        }
      }
      if (found < 0) return undefined;
      take(trial, found, task.requests);
      taken.add(found);
      assignments.push({ task: task.name, node: trial.names[found] });
    }
    adopt(this, trial);
    return assignments;
  }
}

// Helpers of `Ledger` kept out of its public surface. (Not private methods: a ledger
// made by `copy` is not constructed, and private names check for that.)

function take(ledger, at, request) {
  ledger.cpu[at] -= request.cpuMillis;
  ledger.memory[at] -= request.memoryBytes;
  ledger.gpus[at] -= request.gpus;
}

/** How many of `tasks`, in order, fit on the node at `at` together (greedy), counting
 * only those allowed there. */
function howManyFit(ledger, at, tasks) {
  if (!ledger.schedulable[at]) return 0;
  let cpu = ledger.cpu[at];
  let memory = ledger.memory[at];
  let gpus = ledger.gpus[at];
  let count = 0;
  for (const task of tasks) {
    const r = task.requests;
    if (ledger.allows(task, at) && cpu >= r.cpuMillis && memory >= r.memoryBytes && gpus >= r.gpus) {
      cpu -= r.cpuMillis;
      memory -= r.memoryBytes;
      gpus -= r.gpus;
      count += 1;
    }
  }
  return count;
}

/** Takes over the charges of a trial copy that succeeded. */
function adopt(ledger, trial) {
  ledger.cpu = trial.cpu;
  ledger.memory = trial.memory;
  ledger.gpus = trial.gpus;
}
