// Taking the cluster as deltas: the snapshot an `incremental-policy` instance holds.
//
// The host may keep a policy's instance between calls and send only what changed
// (`snapshot-delta` in the WIT). The binding (`binding.js`) applies each change here
// before calling the policy, so a policy is written against a whole snapshot and cannot
// tell the two apart. The rules are the Rust SDK's (`policies/sdk/src/incremental.rs`)
// and the Python SDK's, message for message: removed items leave, changed ones replace
// the held ones in place, new ones follow; a change that does not fit what is held is
// refused, and the instance then holds nothing (the host starts a fresh one).
//
// Beside the snapshot, `Held` counts how often its jobs and nodes changed, so views
// derived from them (which jobs wait, the free capacity per node) are recomputed only
// when something they read moved: in a steady round only loss series move.

import { PolicyError, exact, jobToNumbers, nodeToNumbers, seriesLength } from './contract.js';

/** The snapshot this instance reached on its last call, and how often its job list and
 * its node list (with the eligibility sets) changed. */
export class Held {
  constructor() {
    /** @type {import('./index.js').Snapshot | null} */
    this.snapshot = null;
    this.jobsVersion = 0;
    this.nodesVersion = 0;
    /** Views derived from the snapshot, by name: `{ version, value }`. `Cluster` keeps
     * them here so they live as long as the snapshot does. */
    this.memo = new Map();
  }

  /** Brings the held snapshot to the one `change` describes; on a refusal the instance
   * holds nothing and the error says why. */
  apply(change) {
    try {
      return this.#apply(change);
    } catch (error) {
      this.snapshot = null;
      this.jobsVersion += 1;
      this.nodesVersion += 1;
      throw error;
    }
  }

  #apply(change) {
    change.nodes.forEach(nodeToNumbers);
    change.jobs.forEach(jobToNumbers);
    if (change.reset) {
      this.snapshot = {
        time: change.time,
        triggers: change.triggers,
        nodes: change.nodes,
        jobs: change.jobs,
        nodeSets: change.nodeSets ?? [],
      };
      this.jobsVersion += 1;
      this.nodesVersion += 1;
      return this.snapshot;
    }
    const snapshot = this.snapshot;
    if (snapshot === null) {
      throw new PolicyError('the host sent a change, but this instance holds no snapshot to apply it to');
    }
    snapshot.time = change.time;
    snapshot.triggers = change.triggers;
    if (change.nodeSets != null) {
      snapshot.nodeSets = change.nodeSets;
      this.nodesVersion += 1;
    }
    if (change.nodes.length || change.removedNodes.length) {
      merge(snapshot.nodes, change.nodes, change.removedNodes, nodeName, 'node');
      this.nodesVersion += 1;
    }
    if (change.jobs.length || change.removedJobs.length) {
      merge(snapshot.jobs, change.jobs, change.removedJobs, jobId, 'job');
      this.jobsVersion += 1;
    }
    applyLoss(snapshot.jobs, change.lossUpdates);
    return snapshot;
  }
}

const nodeName = (node) => node.name;
const jobId = (job) => job.id;

function applyLoss(jobs, updates) {
  // In a steady round every running job reported a sample: this loop is most of what
  // the SDK does then, so it touches each column once per job.
  const { jobs: positions, dropped: drops, appended: counts, samples } = updates;
  if (drops.length !== positions.length || counts.length !== positions.length) {
    throw new PolicyError(
      `loss updates name ${positions.length} jobs but give ${drops.length} drop counts and ${counts.length} append counts`,
    );
  }
  const sent = seriesLength(samples, 'appended loss samples: ');
  const { times, steps, values } = samples;
  let at = 0;
  let previous = -1;
  for (let k = 0; k < positions.length; k += 1) {
    const position = positions[k];
    if (!(position > previous)) {
      throw new PolicyError(`loss update for job #${position} follows one for job #${previous}: positions must increase`);
    }
    previous = position;
    const job = jobs[position];
    if (job === undefined) {
      throw new PolicyError(`loss update for job #${position}, but ${jobs.length} jobs are held`);
    }
    const loss = job.loss;
    const dropped = drops[k];
    if (dropped > loss.times.length) {
      throw new PolicyError(`loss update drops ${dropped} samples of job \`${job.id}\`, which has ${loss.times.length}`);
    }
    const end = at + counts[k];
    if (end > sent) {
      throw new PolicyError(`loss update appends ${counts[k]} samples to job \`${job.id}\`, more than were sent`);
    }
    const { times: heldTimes, steps: heldSteps, values: heldValues } = loss;
    if (dropped === 1) {
      heldTimes.shift();
      heldSteps.shift();
      heldValues.shift();
    } else if (dropped) {
      heldTimes.splice(0, dropped);
      heldSteps.splice(0, dropped);
      heldValues.splice(0, dropped);
    }
    for (; at < end; at += 1) {
      heldTimes.push(times[at]);
      const step = steps[at];
      heldSteps.push(typeof step === 'bigint' ? exact(step, 'loss step') : step);
      heldValues.push(values[at]);
    }
  }
  if (at !== sent) {
    throw new PolicyError('more appended loss samples were sent than the loss updates use');
  }
}

/** Removes the `removed` keys (given in held order), replaces changed items in place
 * and appends new ones. Both lists come in held order, so one forward walk finds each
 * without a map of every key. */
export function merge(held, upserts, removed, key, what) {
  if (removed.length) {
    let next = 0;
    let kept = 0;
    for (const item of held) {
      if (next < removed.length && key(item) === removed[next]) {
        next += 1;
      } else {
        held[kept] = item;
        kept += 1;
      }
    }
    if (next < removed.length) {
      throw new PolicyError(`${what} \`${removed[next]}\` to remove is not held (or out of order)`);
    }
    held.length = kept;
  }
  let cursor = 0;
  let count = held.length;
  for (const item of upserts) {
    const wanted = key(item);
    while (cursor < count && key(held[cursor]) !== wanted) cursor += 1;
    if (cursor < count) {
      held[cursor] = item;
      cursor += 1;
    } else {
      held.push(item);
      count += 1;
      cursor = count;
    }
  }
}
