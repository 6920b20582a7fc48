// least-loaded: a switchyard scheduling policy written in JavaScript on the SDK.
//
// Places every waiting job's pending tasks, one job at a time in submission order, each
// task on the schedulable node whose busiest resource (CPU, memory or GPUs, as a share
// of what the node offers) would be least loaded after taking it. A job is placed whole
// or not at all, so a distributed job never holds half its tasks; a job whose tasks may
// not share a node gets a different node for each. Nothing is ever moved, re-weighted
// or scaled.
//
// Built with componentize-js into a component of the `incremental-policy` world (see
// README.md): the host keeps the instance and sends only what changed, and a round in
// which no job waits costs next to nothing.

import { Policy, decision, exportPolicy, log, oneTaskPerNode, place, wait } from '../../sdk/js/src/index.js';

const RESOURCES = ['any', 'cpu', 'memory', 'gpu'];

export class LeastLoaded extends Policy {
  name = 'least-loaded';
  version = '0.3.0';
  summary = 'places each job whole on the least-loaded nodes (written in JavaScript)';
  parameters = [
    {
      name: 'resource',
      default: 'any',
      doc: 'the load that is balanced: any (the busiest of cpu, memory and gpu), cpu, memory or gpu',
    },
  ];
  // It places by the nodes' load and never looks at a job's loss series. Saying so (the
  // SDK's default is true) spares it the most frequent change of a busy cluster, every
  // job reporting progress: the host then sends no loss at all, so such a round costs
  // this policy nothing and a fresh instance's first call is smaller.
  readsLoss = false;

  check(settings) {
    settings.choice('resource', RESOURCES);
  }

  decide(settings, cluster, state) {
    const resource = settings.choice('resource', RESOURCES);
    const waiting = cluster.waiting();
    if (!waiting.length) return decision([], state);
    let ledger = cluster.ledger();
    const actions = [];
    for (const [job, pending] of waiting) {
      const trial = ledger.copy();
      const taken = oneTaskPerNode(job)
        ? new Set(job.tasks.filter((t) => t.node != null).map((t) => trial.position(t.node)))
        : undefined;
      const assignments = [];
      for (const task of pending) {
        const at = leastLoaded(trial, task, resource, taken);
        if (at === undefined) break;
        trial.chargeTask(trial.names[at], task);
        taken?.add(at);
        assignments.push({ task: task.name, node: trial.names[at] });
      }
      if (assignments.length < pending.length) {
        actions.push(wait(job.id, `${pending.length} pending tasks do not all fit now`));
        continue;
      }
      ledger = trial;
      const nodes = [...new Set(assignments.map((a) => a.node))].sort();
      actions.push(place(job.id, assignments, `least ${resource} load: ${nodes.join(', ')}`));
    }
    log.debug(`${this.name}: ${actions.length} actions at t=${cluster.time.toFixed(0)}`);
    return decision(actions, state);
  }
}

/** Position of the node `task` may run on, with room for it and not in `taken`, whose
 * load after taking it is lowest; ties go to the first in snapshot order. */
export function leastLoaded(ledger, task, resource, taken) {
  const want = task.requests;
  let best;
  let bestLoad = 0;
  for (const at of ledger.positionsFor(task)) {
    if (taken?.has(at)) continue;
    const offered = ledger.allocatable[at];
    const cpu = share(offered.cpuMillis, ledger.cpu[at] - want.cpuMillis);
    const memory = share(offered.memoryBytes, ledger.memory[at] - want.memoryBytes);
    const gpu = share(offered.gpus, ledger.gpus[at] - want.gpus);
    const load = resource === 'any' ? Math.max(cpu, memory, gpu) : { cpu, memory, gpu }[resource];
    if (best === undefined || load < bestLoad) {
      best = at;
      bestLoad = load;
    }
  }
  return best;
}

/** The share of a resource in use when `left` of `offered` remains. */
const share = (offered, left) => (offered === 0 ? 0 : 1 - left / offered);

export const incrementalScheduler = exportPolicy(new LeastLoaded());
