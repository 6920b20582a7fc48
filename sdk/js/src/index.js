// Write switchyard scheduling policies in JavaScript.
//
// A policy subclasses `Policy` and the app module exports its binding under the name
// componentize-js looks for:
//
//     import { Policy, exportPolicy } from './switchyard-sdk/src/index.js';
//     class LeastLoaded extends Policy { name = 'least-loaded'; decide(settings, cluster, state) { ... } }
//     export const incrementalScheduler = exportPolicy(new LeastLoaded());
//
// The component exports `switchyard:policy/incremental-policy@0.3.0`: the host keeps
// the instance and sends only what changed, which the SDK applies to the snapshot it
// holds (`incremental.js`), so `decide` always sees the whole cluster (`Cluster`).
//
// Modules, as in the Rust and Python SDKs:
//
// - `contract.js`: `PolicyError` and the u64 conversion (the types are in `index.d.ts`);
// - `policy.js`: `Policy` and `Cluster`, the round's snapshot with cached views;
// - `decision.js`: one function per operation (`place`, `wait`, `migrate`, ...);
// - `settings.js`: parameters checked against the spec and read typed;
// - `cluster.js`: resource arithmetic, `Ledger` (free capacity, fit, gang packing);
// - `progress.js`: normalised evaluation series and gains;
// - `state.js`: the state blob as JSON;
// - `log.js`: the host's log, captured in native tests;
// - `incremental.js`: applying the host's deltas;
// - `testing.js`: fixtures and the `Harness` for `node --test` (Node only, not
//   re-exported here).

export { exportPolicy } from './binding.js';
export {
  Ledger,
  ONE_TASK_PER_NODE_LABEL,
  covers,
  freeOf,
  leastAllocatedScore,
  minus,
  nodesOf,
  oneTaskPerNode,
  pendingTasks,
  plus,
  totalRequests,
  zero,
} from './cluster.js';
export { PolicyError } from './contract.js';
export { decision, label, migrate, place, preempt, scale, setCpuWeight, wait } from './decision.js';
export * as log from './log.js';
export { Cluster, Policy } from './policy.js';
export { Normalisation, Scale, gain, parseNormalisation, valueAt } from './progress.js';
export { Settings } from './settings.js';
export * as state from './state.js';
