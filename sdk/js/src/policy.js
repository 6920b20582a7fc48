// What a policy author writes against: `Policy` (describe, check settings, decide) and
// `Cluster`, the view of the snapshot a round decides on.
//
// `Cluster` is the whole snapshot (`cluster.snapshot`, or `nodes`, `jobs`, ... directly)
// plus views derived from it that a kept instance need not recompute every round: the
// jobs with pending tasks change only when a job arrives, leaves or changes, and the
// free capacity per node only when a node changes, while a steady round moves loss
// series alone. The views are recomputed when the held snapshot's jobs or nodes changed
// (`Held` counts), so a policy that uses them pays for what moved.

import { Ledger, pendingTasks } from './cluster.js';
import { Held } from './incremental.js';

/** One round's snapshot, with cached views of it. */
export class Cluster {
  constructor(snapshot, held = undefined) {
    if (held === undefined) {
      held = new Held();
      held.snapshot = snapshot;
    }
    this.snapshot = snapshot;
    this.held = held;
  }

  get time() {
    return this.snapshot.time;
  }

  get triggers() {
    return this.snapshot.triggers;
  }

  get nodes() {
    return this.snapshot.nodes;
  }

  get jobs() {
    return this.snapshot.jobs;
  }

  get nodeSets() {
    return this.snapshot.nodeSets;
  }

  #memo(name, version, compute) {
    const kept = this.held.memo.get(name);
    if (kept !== undefined && kept.version === version) return kept.value;
    const value = compute();
    this.held.memo.set(name, { version, value });
    return value;
  }

  /** Every job with tasks not yet on a node, as `[job, pendingTasks]`, in snapshot
   * order. Computed again only when a job arrived, left or changed. Do not change the
   * list: the next round may hand it out again. */
  waiting() {
    return this.#memo('waiting', this.held.jobsVersion, () => {
      const found = [];
      for (const job of this.snapshot.jobs) {
        const pending = pendingTasks(job);
        if (pending.length) found.push([job, pending]);
      }
      return found;
    });
  }

  /** A fresh `Ledger` of this round: free capacity as the snapshot reports it and the
   * eligibility sets, for the policy to charge. Indexed again only when a node or an
   * eligibility set changed; each call is a copy of the capacities. */
  ledger() {
    return this.#memo('ledger', this.held.nodesVersion, () => Ledger.of(this.snapshot)).copy();
  }
}

/** A scheduling policy. Subclasses set `name`, `version`, `summary`, `parameters`
 * (`{ name, default, doc }`) and `readsLoss`, and implement `decide`; `check` refuses
 * bad parameter values. The constructor takes no arguments: the component makes one
 * instance, and the test harness makes a fresh one for every round to compare with.
 *
 * `readsLoss` says whether the policy reads jobs' loss series (`job.loss`). It is true
 * unless a policy says otherwise, so a policy that reads them cannot be handed empty
 * ones by forgetting it. A policy that never reads them should say false: the host then
 * sends every series empty and no loss updates, so a round in which jobs only reported
 * progress (a busy cluster's most frequent round) is, for it, a round in which nothing
 * changed, and a fresh instance's first call carries no series. The host asks once,
 * when it loads the component.
 *
 * Keep nothing on `this` between calls: the host may start a fresh instance whenever it
 * likes (the first call, after a failure, a hot swap, a restart), and only the state
 * blob `decide` returns survives. */
export class Policy {
  name = '';
  version = '0.1.0';
  summary = '';
  /** @type {{name: string, default: string, doc: string}[]} */
  parameters = [];
  readsLoss = true;

  /** Name, version, parameters with their defaults and docs, and whether it reads loss
   * series, in WIT form. */
  describe() {
    if (typeof this.readsLoss !== 'boolean') {
      throw new TypeError(`${this.constructor.name}.readsLoss must be true or false, got ${JSON.stringify(this.readsLoss)}`);
    }
    return {
      name: this.name,
      version: this.version,
      summary: this.summary,
      parameters: this.parameters.map((p) => ({ name: p.name, defaultValue: p.default, doc: p.doc })),
      readsLoss: this.readsLoss,
    };
  }

  /** Throws `PolicyError` for a parameter value the policy cannot use; called by
   * `configure` (when the operator sets them) and before every round. */
  check(_settings) {}

  /** One decision round: the effective settings, the cluster as it is now and the state
   * this policy returned last time (empty on the first call). */
  decide(_settings, _cluster, _state) {
    throw new Error(`${this.constructor.name} does not implement decide()`);
  }
}
