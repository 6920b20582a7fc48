// The native harness runs a policy as the host would, and catches what the host would
// punish: a policy that keeps memory outside its state blob, a refusal.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Policy, PolicyError, decision, exportPolicy, place, state, wait } from '../src/index.js';
import { Harness, job, node, resetOf, snapshot } from '../src/testing.js';

class FirstFit extends Policy {
  name = 'first-fit';
  parameters = [{ name: 'limit', default: '10', doc: 'jobs placed per round at most' }];

  check(settings) {
    settings.floatIn('limit', 1, 1000);
  }

  decide(settings, cluster, blob) {
    const rounds = state.decode(blob, () => 0) + 1;
    const ledger = cluster.ledger();
    const actions = cluster
      .waiting()
      .slice(0, settings.float('limit'))
      .map(([j, pending]) => {
        const placed = ledger.packGang(pending);
        return placed ? place(j.id, placed, 'first fit') : wait(j.id, 'no room');
      });
    return decision(actions, state.encode(rounds));
  }
}

/** Counts rounds in a field: a fresh instance starts again at zero. */
class Forgetful extends FirstFit {
  rounds = 0;

  decide() {
    this.rounds += 1;
    return decision([], state.encode(this.rounds));
  }
}

test('the state goes round to round and the views follow the deltas', () => {
  const h = new Harness(new FirstFit());
  const nodes = [node('n1', 2000)];
  let d = h.decide(snapshot(0, nodes, [job('a'), job('b'), job('c')]));
  assert.deepEqual(h.placements(d), { a: { main: 'n1' }, b: { main: 'n1' } });
  assert.deepEqual(h.waiting(d), ['c']);
  d = h.decide(snapshot(30, nodes, [job('c')]));
  assert.deepEqual(h.placements(d), { c: { main: 'n1' } });
  assert.equal(state.decode(h.state, () => 0), 2);
});

test('a policy that remembers outside its state fails its tests', () => {
  const h = new Harness(new Forgetful());
  h.decide(snapshot(0, [node('n1')], []));
  assert.throws(() => h.decide(snapshot(30, [node('n1')], [])), /kept instance than on a fresh one/);
});

test("a refusal reaches the test as the operator's message", () => {
  assert.throws(() => new Harness(new FirstFit(), { limit: '0' }).configure(), new PolicyError('parameter `limit` must be between 1 and 1000, got 0'));
  assert.throws(
    () => new Harness(new FirstFit(), { limt: '3' }).decide(snapshot(0, [], [])),
    new PolicyError('unknown parameter `limt`; this policy accepts: limit'),
  );
});

test('the binding answers refusals as WIT errors and describes the policy', () => {
  const binding = exportPolicy(new FirstFit());
  assert.equal(binding.describe().parameters[0].defaultValue, '10');
  assert.deepEqual(binding.configure([]), [{ name: 'limit', value: '10' }]);
  // What componentize-js turns into the `err` of the WIT result: an object with a payload.
  assert.throws(
    () => binding.decide([], { ...resetOf(snapshot(0, [], [])), reset: false }, new Uint8Array()),
    (e) => !(e instanceof Error) && /holds no snapshot/.test(e.payload),
  );
  // Anything else is a bug in the policy: it traps the call rather than reading as a refusal.
  class Broken extends FirstFit {
    decide() {
      return undefined.field;
    }
  }
  assert.throws(() => exportPolicy(new Broken()).decide([], resetOf(snapshot(0, [], [])), new Uint8Array()), TypeError);
  assert.throws(() => exportPolicy(FirstFit), /takes a Policy instance/);
});

/** Hands back how many loss samples each job showed it, so a test sees what it was sent. */
class CountsSamples extends FirstFit {
  decide(_settings, cluster) {
    return decision([], state.encode(Object.fromEntries(cluster.jobs.map((j) => [j.id, j.loss.values.length]))));
  }
}

class CountsSamplesWithoutReading extends CountsSamples {
  readsLoss = false;
}

test('a policy says it reads loss unless it says otherwise', () => {
  assert.equal(exportPolicy(new FirstFit()).describe().readsLoss, true);
  assert.equal(exportPolicy(new CountsSamplesWithoutReading()).describe().readsLoss, false);
  class Vague extends FirstFit {
    readsLoss = 'no';
  }
  assert.throws(() => exportPolicy(new Vague()).describe(), /readsLoss must be true or false, got "no"/);
});

test('the harness sends a policy that reads no loss every series empty', () => {
  const s = snapshot(0, [node('n1')], [job('a', undefined, { loss: [[0, 3], [30, 2]] }), job('b')]);
  const counts = (h, at) => state.decode(h.decide(at).state, () => ({}));
  assert.deepEqual(counts(new Harness(new CountsSamples()), s), { a: 2, b: 0 });
  const h = new Harness(new CountsSamplesWithoutReading());
  assert.deepEqual(counts(h, s), { a: 0, b: 0 });
  s.jobs[0].loss.times.push(60);
  s.jobs[0].loss.steps.push(2);
  s.jobs[0].loss.values.push(1);
  assert.deepEqual(counts(h, s), { a: 0, b: 0 });
});
