// The ledger: free capacity charged as a round decides, eligibility honoured, gangs
// packed all or nothing on the fewest nodes (the Rust SDK's `cluster` rules).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Ledger, covers, minus, nodesOf, oneTaskPerNode, pendingTasks, totalRequests } from '../src/cluster.js';
import { distributed, job, node, onlyOn, res, snapshot } from '../src/testing.js';

test('free capacity is what the snapshot reports less what the round charged', () => {
  const ledger = Ledger.of(snapshot(0, [node('n1', 4000, { used: 1000 })], [job('a', res(500), { on: 'n1' })]));
  assert.equal(ledger.free('n1').cpuMillis, 2500);
  assert.ok(ledger.charge('n1', res(2000)));
  assert.ok(!ledger.charge('n1', res(1000)), 'only 500 millicores are left');
  assert.equal(ledger.free('n1').cpuMillis, 500);
  ledger.release('n1', res(9000));
  assert.equal(ledger.free('n1').cpuMillis, 4000, 'release stops at what the node offers');
  assert.equal(ledger.free('nowhere'), undefined);
});

test('an unschedulable node fits nothing', () => {
  const ledger = Ledger.of(snapshot(0, [node('n1', 8000, { schedulable: false }), node('n2')], []));
  assert.ok(!ledger.fits('n1', res(1)));
  assert.deepEqual(ledger.nodesFor(job('a').tasks[0]), ['n2']);
});

test('a task is offered only the nodes of its eligibility set', () => {
  const s = onlyOn(snapshot(0, [node('n1'), node('n2'), node('n3')], [job('a'), job('b')]), 'a', ['n3']);
  const ledger = Ledger.of(s);
  const [a, b] = [s.jobs[0].tasks[0], s.jobs[1].tasks[0]];
  assert.deepEqual(ledger.nodesFor(a), ['n3']);
  assert.deepEqual(ledger.nodesFor(b), ['n1', 'n2', 'n3']);
  assert.ok(!ledger.chargeTask('n1', a) && ledger.chargeTask('n3', a));
  assert.ok(!ledger.fitsTask('n1', a));
  assert.deepEqual(ledger.roomsFor(a).map((r) => r.name), ['n3']);
  a.eligible = 99;
  assert.deepEqual(ledger.nodesFor(a), [], 'a set the host did not send allows nothing');
});

test('a gang is packed on the fewest nodes or not at all', () => {
  const ledger = Ledger.of(snapshot(0, [node('small', 2000), node('big', 6000), node('mid', 4000)], []));
  const gang = distributed('g', 1, 3, { requests: res(1600) });
  const placed = ledger.packGang(pendingTasks(gang));
  assert.deepEqual(
    placed.map((a) => [a.task, a.node]),
    [['ps-0', 'big'], ['worker-0', 'big'], ['worker-1', 'big'], ['worker-2', 'small']],
    'the first node taking the most, ties in snapshot order',
  );
  const free = () => ['small', 'big', 'mid'].map((n) => ledger.free(n).cpuMillis);
  const before = free();
  assert.equal(ledger.packGang(pendingTasks(distributed('h', 0, 3, { requests: res(1600) }))), undefined);
  assert.deepEqual(free(), before, 'a failed gang charges nothing');
});

test('a job kept one task per node gets a node for each task beside its running ones', () => {
  const ledger = Ledger.of(snapshot(0, [node('n0'), node('n1'), node('n2')], []));
  const apart = distributed('a', 0, 3, { requests: res(1000), oneTaskPerNode: true });
  apart.tasks[0].node = 'n0';
  assert.deepEqual(ledger.packGangOf(apart, pendingTasks(apart)).map((a) => a.node), ['n1', 'n2']);
  assert.ok(oneTaskPerNode(apart) && !oneTaskPerNode(job('b')));
  assert.equal(ledger.packGangOf(apart, [...pendingTasks(apart), apart.tasks[0]]), undefined);
});

test('a copy is charged apart from its original', () => {
  const ledger = Ledger.of(snapshot(0, [node('n1', 4000)], []));
  const trial = ledger.copy();
  trial.charge('n1', res(3000));
  assert.equal(ledger.free('n1').cpuMillis, 4000);
  assert.equal(trial.free('n1').cpuMillis, 1000);
  assert.equal(trial.emptied().free('n1').cpuMillis, 4000);
  assert.ok(trial.chargeTasks('n1', [job('x', res(500)).tasks[0], job('y', res(500)).tasks[0]]));
  assert.ok(!trial.chargeTasks('n1', [job('x', res(500)).tasks[0], job('y', res(500)).tasks[0]]), 'together they no longer fit');
});

test('resource arithmetic and job helpers', () => {
  assert.deepEqual(minus(res(1000, 5, 1), res(2000, 1, 0)), res(0, 4, 1));
  assert.ok(covers(res(2, 2, 2), res(1, 2, 0)) && !covers(res(2, 2, 2), res(3, 0, 0)));
  const g = distributed('g', 1, 2, { requests: res(700), on: 'n1' });
  assert.equal(totalRequests(g.tasks).cpuMillis, 2100);
  assert.deepEqual(nodesOf(g), ['n1']);
  assert.deepEqual(pendingTasks(g), []);
});

test("the least-allocated score is kube-scheduler's", () => {
  const ledger = Ledger.of(snapshot(0, [node('n1', 4000, { memoryBytes: 8 })], []));
  // Half the CPU and a quarter of the memory left: (50 + 25) / 2.
  assert.equal(ledger.leastAllocatedScore('n1', res(2000, 6)), 37.5);
  assert.equal(ledger.leastAllocatedScore('nowhere', res()), 0);
});
