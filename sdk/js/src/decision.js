// Building a decision: one function per operation of the contract, each with the
// reason the operator reads, and the decision that carries them.

/** Bind pending tasks of `job`, all or none (a gang is one placement). */
export const place = (job, assignments, reason) => ({
  op: { tag: 'place', val: { job, assignments: [...assignments] } },
  reason,
});

/** Leave `job` waiting this round (recorded only). */
export const wait = (job, reason) => ({ op: { tag: 'wait', val: job }, reason });

/** Checkpoint, stop and restore `task` (every task when undefined) of `job` on `node`;
 * `purpose` is kept in the job's move history. */
export const migrate = (job, node, reason, { task, purpose = '' } = {}) => ({
  op: { tag: 'migrate', val: { job, task, node, purpose } },
  reason,
});

/** Set one task's relative CPU weight, in (0, 1]. */
export const setCpuWeight = (job, task, weight, reason) => ({
  op: { tag: 'set-cpu-weight', val: { job, task, weight } },
  reason,
});

/** Restart `job` with `replicas` replicas of its scalable role; `nodes` names where each
 * added replica goes. */
export const scale = (job, replicas, nodes, reason) => ({
  op: { tag: 'scale', val: { job, replicas, nodes: [...nodes] } },
  reason,
});

/** Checkpoint a running job and release its tasks; it waits again. */
export const preempt = (job, reason) => ({ op: { tag: 'preempt', val: job }, reason });

/** A label shown on `job` (replaces this policy's previous labels on it). */
export const label = (job, key, value) => ({ job, key, value });

/** The answer to one call; `state` is handed back on the next one. */
export function decision(actions, state = new Uint8Array(), { labels = [], nextCallAfter } = {}) {
  return { actions: [...actions], labels: [...labels], nextCallAfter, state: Uint8Array.from(state) };
}
