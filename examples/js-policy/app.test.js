// least-loaded's logic under `node --test`, no component built.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { PolicyError } from '../../sdk/js/src/index.js';
import { Harness, distributed, job, node, onlyOn, res, snapshot } from '../../sdk/js/src/testing.js';
import { LeastLoaded } from './app.js';

test('a job goes to the node least loaded after taking it', () => {
  const h = new Harness(new LeastLoaded());
  const d = h.decide(snapshot(0, [node('busy', 4000, { used: 3000 }), node('idle', 4000)], [job('a')]));
  assert.deepEqual(h.placements(d), { a: { main: 'idle' } });
});

test('a gang that does not fit whole waits and holds nothing', () => {
  const h = new Harness(new LeastLoaded());
  const gang = distributed('g', 1, 3, { requests: res(3000) });
  const d = h.decide(snapshot(0, [node('n1', 4000), node('n2', 4000), node('n3', 4000)], [gang]));
  assert.deepEqual(h.placements(d), {});
  assert.deepEqual(h.waiting(d), ['g']);
});

test('tasks of one round do not count the same room twice', () => {
  const h = new Harness(new LeastLoaded());
  const d = h.decide(snapshot(0, [node('n1', 4000), node('n2', 4000)], [job('a', res(3000)), job('b', res(3000))]));
  assert.deepEqual(h.placements(d), { a: { main: 'n1' }, b: { main: 'n2' } });
});

test('a task goes only where its eligibility set allows', () => {
  const h = new Harness(new LeastLoaded());
  const s = onlyOn(snapshot(0, [node('big', 16000), node('small', 4000)], [job('a')]), 'a', ['small']);
  assert.deepEqual(h.placements(h.decide(s)), { a: { main: 'small' } });
});

test('a job kept one task per node spreads its tasks', () => {
  const h = new Harness(new LeastLoaded());
  const spread = distributed('s', 0, 2, { requests: res(500), oneTaskPerNode: true });
  const d = h.decide(snapshot(0, [node('n1', 64000), node('n2', 4000)], [spread]));
  assert.deepEqual(Object.values(h.placements(d).s).sort(), ['n1', 'n2']);
});

test('later rounds see the cluster the deltas describe', () => {
  const h = new Harness(new LeastLoaded());
  const nodes = [node('n1', 4000), node('n2', 4000)];
  assert.deepEqual(h.placements(h.decide(snapshot(0, nodes, [job('a', res(3000))]))), { a: { main: 'n1' } });
  const running = snapshot(30, nodes, [job('a', res(3000), { on: 'n1' }), job('b', res(2000))]);
  assert.deepEqual(h.placements(h.decide(running)), { b: { main: 'n2' } });
  // Nothing waits: a round with only loss moving decides nothing.
  const quiet = snapshot(60, nodes, [job('a', res(3000), { on: 'n1', loss: [[60, 1]] }), job('b', res(2000), { on: 'n2' })]);
  assert.deepEqual(h.decide(quiet).actions, []);
});

test('an unknown resource is refused with the choices', () => {
  assert.throws(() => new Harness(new LeastLoaded(), { resource: 'disk' }).configure(), (e) => {
    assert.ok(e instanceof PolicyError);
    assert.equal(e.message, 'parameter `resource` must be one of any, cpu, memory, gpu, got `disk`');
    return true;
  });
  assert.deepEqual(new Harness(new LeastLoaded()).configure(), { resource: 'any' });
});

test('it reads no loss and decides as it would with every series', () => {
  assert.equal(new LeastLoaded().describe().readsLoss, false);
  class ReadingLoss extends LeastLoaded {
    readsLoss = true;
  }
  const nodes = [node('n1', 4000), node('n2', 4000, { used: 1000 })];
  const jobs = [
    job('a', res(1000), { on: 'n1', loss: [[0, 3], [30, 2]] }),
    job('b', res(500), { loss: [[0, 9]] }),
    job('c'),
  ];
  const blind = new Harness(new LeastLoaded()).decide(snapshot(30, nodes, jobs));
  assert.deepEqual(blind, new Harness(new ReadingLoss()).decide(snapshot(30, nodes, jobs)));
});
