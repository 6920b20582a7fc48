// The delta application, property-tested against the whole snapshot.
//
// Two properties, as the Rust SDK's tests (`host/runtime/tests/runtime/incremental.rs`) and the Python SDK's
// check them:
//
// - random sequences of cluster changes (arrivals, departures, loss series moving on or
//   replaced, tasks starting, node load changing, nodes joining and leaving,
//   eligibility sets, reorders) sent as the host's deltas leave the kept instance
//   holding exactly the whole snapshot after every round, and only the first round and
//   reorders go as resets;
// - a delta that does not fit what is held is refused with a message naming the fault,
//   and the instance then holds nothing.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';

import fc from 'fast-check';

import { PolicyError } from '../src/contract.js';
import { Held } from '../src/incremental.js';
import { delta, job, lossSeries, node, res, resetOf, snapshot, withoutLoss } from '../src/testing.js';

const index = fc.nat(7);
const STEP = fc.oneof(
  fc.tuple(fc.constant('arrive')),
  fc.tuple(fc.constant('finish'), index),
  fc.tuple(fc.constant('progress'), index, fc.nat(3), fc.nat(3)),
  fc.tuple(fc.constant('new-loss'), index),
  fc.tuple(fc.constant('start'), index),
  fc.tuple(fc.constant('load'), index),
  fc.tuple(fc.constant('node-leaves'), index),
  fc.tuple(fc.constant('node-joins')),
  fc.tuple(fc.constant('sets'), index),
  fc.tuple(fc.constant('arrive-first')),
  fc.tuple(fc.constant('swap'), index, index),
);

/** Changes `s` in place as the cluster would between two rounds. */
function applyStep(s, [kind, a, b, c], serial) {
  const { jobs, nodes } = s;
  const newId = `job-${serial}`;
  if (kind === 'arrive') {
    jobs.push(job(newId, res(), { loss: [[0, 3], [1, 2]] }));
  } else if (kind === 'arrive-first') {
    jobs.unshift(job(newId));
  } else if (kind === 'finish' && jobs.length) {
    const [gone] = jobs.splice(a % jobs.length, 1);
    s.triggers.push({ tag: 'job-finished', val: gone.id });
  } else if (kind === 'progress' && jobs.length) {
    const loss = jobs[a % jobs.length].loss;
    loss.times.splice(0, b);
    loss.steps.splice(0, b);
    loss.values.splice(0, b);
    const last = loss.times.length ? loss.times[loss.times.length - 1] : 0;
    for (let k = 1; k <= c; k += 1) {
      loss.times.push(last + k);
      loss.steps.push(serial * 10 + k);
      loss.values.push(1 / (serial + k));
    }
  } else if (kind === 'new-loss' && jobs.length) {
    jobs[a % jobs.length].loss = { times: [serial], steps: [1], values: [9] };
  } else if (kind === 'start' && jobs.length && nodes.length) {
    const task = jobs[a % jobs.length].tasks[0];
    task.node = nodes[a % nodes.length].name;
    task.phase = 'running';
  } else if (kind === 'load' && nodes.length) {
    nodes[a % nodes.length].requested = res((serial % 8) * 1000, 1, 0);
  } else if (kind === 'node-leaves' && nodes.length) {
    nodes.splice(a % nodes.length, 1);
    s.nodeSets = s.nodeSets.map((x) => ({ id: x.id, nodes: x.nodes.filter((p) => p < nodes.length) }));
  } else if (kind === 'node-joins') {
    nodes.push(node(`node-${serial}`));
  } else if (kind === 'sets' && nodes.length) {
    s.nodeSets = [{ id: serial, nodes: [...new Set([a % nodes.length, 0])].sort((x, y) => x - y) }];
  } else if (kind === 'swap' && jobs.length) {
    const x = a % jobs.length;
    const y = b % jobs.length;
    [jobs[x], jobs[y]] = [jobs[y], jobs[x]];
  }
}

/** True when `after`'s jobs or nodes cannot be reached from `before`'s by removals,
 * in-place changes and appends: the host must send a reset. */
function reorders(before, after) {
  const reachable = (old, now) => {
    const kept = old.filter((k) => now.includes(k));
    return kept.every((k, i) => now[i] === k);
  };
  return !(
    reachable(before.jobs.map((j) => j.id), after.jobs.map((j) => j.id)) &&
    reachable(before.nodes.map((n) => n.name), after.nodes.map((n) => n.name))
  );
}

const ROUNDS = fc.array(fc.array(STEP, { maxLength: 4 }), { minLength: 1, maxLength: 12 });

/** Plays `rounds` on two nodes and two jobs, as the host would, and hands `check` each
 * round: its number and steps (as `context`), the snapshot before and after them, and
 * the delta sent for it. */
function eachRound(rounds, readsLoss, check) {
  const s = snapshot(0, [node('n1'), node('n2')], [job('j1', res(), { loss: [[0, 5], [1, 4], [2, 3]] }), job('j2')]);
  let sent;
  let serial = 0;
  rounds.forEach((steps, number) => {
    s.time = number * 30;
    s.triggers = [];
    const before = structuredClone(s);
    for (const step of steps) {
      serial += 1;
      applyStep(s, step, serial);
    }
    check({ number, context: JSON.stringify({ number, steps }), before, s, change: delta(sent, s, readsLoss) });
    sent = structuredClone(s);
  });
}

test('a kept instance holds exactly the whole snapshot every round', () => {
  fc.assert(
    fc.property(ROUNDS, (rounds) => {
      const held = new Held();
      eachRound(rounds, true, ({ number, context, before, s, change }) => {
        assert.equal(change.reset, number === 0 || reorders(before, s), context);
        // The instance gets its own copy, as it would through the component boundary.
        assert.deepEqual(held.apply(structuredClone(change)), s, context);
      });
    }),
    { numRuns: 200 },
  );
});

test('a policy that reads no loss holds the snapshot without it and is sent no loss', () => {
  fc.assert(
    fc.property(ROUNDS, (rounds) => {
      const held = new Held();
      eachRound(rounds, false, ({ number, context, before, s, change }) => {
        assert.equal(change.reset, number === 0 || reorders(before, s), context);
        assert.equal(change.lossUpdates.jobs.length + change.lossUpdates.samples.times.length, 0, context);
        assert.ok(change.jobs.every((j) => j.loss.times.length === 0), context);
        if (!change.reset) {
          const old = new Map(withoutLoss(before).jobs.map((j) => [j.id, j]));
          const moved = withoutLoss(s).jobs.filter((j) => !isDeepStrictEqual(old.get(j.id), j));
          assert.deepEqual(change.jobs.map((j) => j.id), moved.map((j) => j.id), context);
        }
        assert.deepEqual(held.apply(structuredClone(change)), withoutLoss(structuredClone(s)), context);
      });
    }),
    { numRuns: 100 },
  );
});

test('removals, changes and arrivals keep the order rule', () => {
  // Random removals, in-place changes and arrivals, built directly as a delta, give the
  // list a map of the jobs would: the held order less the removed ones, the changed ones
  // in place, the new ones last in the order sent.
  const ids = fc.uniqueArray(fc.stringMatching(/^[a-f]{1,3}$/), { maxLength: 8 });
  const arrivals = fc.uniqueArray(fc.stringMatching(/^[u-z]{1,3}$/), { maxLength: 4 });
  fc.assert(
    fc.property(ids, fc.infiniteStream(fc.boolean()), arrivals, (ids, coin, arriving) => {
      const held = new Held();
      held.apply(resetOf(snapshot(0, [], ids.map((i) => job(i)))));
      const flips = coin[Symbol.iterator]();
      const flip = () => flips.next().value;
      const removed = ids.filter(() => flip());
      const staying = ids.filter((i) => !removed.includes(i));
      const changed = staying.filter(() => flip());
      const upserts = [...changed.map((i) => job(i, res(), { priority: 7 })), ...arriving.map((i) => job(i, res(), { priority: 9 }))];
      const change = { ...quiet(), jobs: upserts, removedJobs: removed };
      const result = held.apply(change);
      assert.deepEqual(result.jobs.map((j) => j.id), [...staying, ...arriving]);
      const priority = Object.fromEntries(result.jobs.map((j) => [j.id, j.priority]));
      const expected = Object.fromEntries([
        ...staying.map((i) => [i, 0]),
        ...changed.map((i) => [i, 7]),
        ...arriving.map((i) => [i, 9]),
      ]);
      assert.deepEqual(priority, expected);
    }),
    { numRuns: 100 },
  );
});

function heldWith(ids) {
  const held = new Held();
  held.apply(resetOf(snapshot(0, [node('n1')], ids.map((i) => job(i, res(), { loss: [[0, 1], [1, 0.5]] })))));
  return held;
}

/** Loss updates of `[position, dropped, appended]` entries, appending `samples`. */
const updates = (entries, samples = []) => ({
  jobs: entries.map((e) => e[0]),
  dropped: entries.map((e) => e[1]),
  appended: entries.map((e) => e[2]),
  samples: lossSeries(samples),
});

/** A change that changes nothing. */
const quiet = () => ({ ...resetOf(snapshot(1, [], [])), reset: false, nodeSets: undefined });

test('a change to nothing held is refused', () => {
  assert.throws(() => new Held().apply(quiet()), new PolicyError('the host sent a change, but this instance holds no snapshot to apply it to'));
});

for (const [what, breakIt, message] of [
  ['an unknown job to remove', (c) => (c.removedJobs = ['zz']), 'job `zz` to remove is not held (or out of order)'],
  ['removals out of order', (c) => (c.removedJobs = ['b', 'a']), 'job `a` to remove is not held (or out of order)'],
  ['an unknown node to remove', (c) => (c.removedNodes = ['gone']), 'node `gone` to remove is not held (or out of order)'],
  ['a loss update past the jobs', (c) => (c.lossUpdates = updates([[5, 0, 0]])), 'loss update for job #5, but 2 jobs are held'],
  ['more dropped than held', (c) => (c.lossUpdates = updates([[0, 3, 0]])), 'loss update drops 3 samples of job `a`, which has 2'],
  ['more appended than sent', (c) => (c.lossUpdates = updates([[1, 0, 2]], [[1, 1]])), 'loss update appends 2 samples to job `b`, more than were sent'],
  ['samples no update uses', (c) => (c.lossUpdates = updates([], [[1, 1]])), 'more appended loss samples were sent than the loss updates use'],
  ['positions out of order', (c) => (c.lossUpdates = updates([[1, 0, 0], [0, 0, 0]])), 'loss update for job #0 follows one for job #1: positions must increase'],
  ['a job updated twice', (c) => (c.lossUpdates = updates([[1, 0, 0], [1, 0, 0]])), 'loss update for job #1 follows one for job #1: positions must increase'],
  ['columns of different lengths', (c) => (c.lossUpdates = { ...updates([[0, 0, 0]]), dropped: [] }), 'loss updates name 1 jobs but give 0 drop counts and 1 append counts'],
  ['ragged appended samples', (c) => (c.lossUpdates = { ...updates([[0, 0, 1]]), samples: { times: [1], steps: [], values: [1] } }), 'appended loss samples: a loss series has 1 times, 0 steps and 1 values'],
  ['a job with a ragged series', (c) => (c.jobs = [{ ...job('a'), loss: { times: [1], steps: [1], values: [] } }]), 'job `a`: a loss series has 1 times, 1 steps and 0 values'],
]) {
  test(`a change with ${what} is refused and forgets everything`, () => {
    const held = heldWith(['a', 'b']);
    const change = quiet();
    breakIt(change);
    assert.throws(() => held.apply(change), new PolicyError(message));
    assert.equal(held.snapshot, null);
    assert.throws(() => held.apply(quiet()), /holds no snapshot/);
  });
}

test('loss updates drop the oldest samples and append the new ones in order', () => {
  const held = heldWith(['a', 'b']);
  const change = { ...quiet(), lossUpdates: updates([[0, 2, 1], [1, 0, 2]], [[2, 0.25], [3, 0.5], [4, 0.75]]) };
  const [a, b] = held.apply(change).jobs;
  assert.deepEqual(a.loss, { times: [2], steps: [0], values: [0.25] });
  assert.deepEqual(b.loss, { times: [0, 1, 3, 4], steps: [0, 1, 1, 2], values: [1, 0.5, 0.5, 0.75] });
});

test('node sets are kept until the host sends new ones', () => {
  const held = new Held();
  held.apply({ ...resetOf(snapshot(0, [node('n1'), node('n2')], [])), nodeSets: [{ id: 0, nodes: [1] }] });
  assert.deepEqual(held.apply(quiet()).nodeSets, [{ id: 0, nodes: [1] }]);
  assert.deepEqual(held.apply({ ...quiet(), nodeSets: [{ id: 3, nodes: [0, 1] }] }).nodeSets, [{ id: 3, nodes: [0, 1] }]);
});

test("the host's u64 amounts arrive as BigInt and are held as numbers", () => {
  const big = (r) => ({ cpuMillis: BigInt(r.cpuMillis), memoryBytes: BigInt(r.memoryBytes), gpus: r.gpus });
  const n = node('n1');
  const j = job('a', res(), { loss: [[0, 1]] });
  const wire = structuredClone({ n, j });
  wire.n.allocatable = big(n.allocatable);
  wire.n.requested = big(n.requested);
  wire.j.tasks[0].requests = big(j.tasks[0].requests);
  wire.j.loss = { times: Float64Array.from(j.loss.times), steps: BigUint64Array.of(0n), values: Float64Array.from(j.loss.values) };
  const held = new Held();
  const s = held.apply(resetOf(snapshot(0, [wire.n], [wire.j])));
  assert.deepEqual(s, snapshot(0, [n], [j]));
  const more = {
    ...quiet(),
    lossUpdates: {
      jobs: Uint32Array.of(0),
      dropped: Uint32Array.of(0),
      appended: Uint32Array.of(1),
      samples: { times: Float64Array.of(2), steps: BigUint64Array.of(7n), values: Float64Array.of(0.5) },
    },
  };
  assert.deepEqual(held.apply(more).jobs[0].loss, { times: [0, 2], steps: [0, 7], values: [1, 0.5] });
});

test('an amount a number cannot hold exactly is refused rather than rounded', () => {
  const n = node('n1');
  n.allocatable.memoryBytes = 2n ** 60n;
  assert.throws(
    () => new Held().apply(resetOf(snapshot(0, [n], []))),
    new PolicyError('memory-bytes 1152921504606846976 is beyond what the JavaScript SDK holds exactly (2^53)'),
  );
});
