// Types of the native test harness (`testing.js`).

import type { Decision, Job, LossSeries, LossUpdates, Node, Policy, Resources, Snapshot, SnapshotDelta, Trigger } from './index.js';

export const GIB: number;
export function res(cpuMillis?: number, memoryBytes?: number, gpus?: number): Resources;
export function node(
  name: string,
  cpuMillis?: number,
  options?: { memoryBytes?: number; gpus?: number; used?: number; schedulable?: boolean; labels?: Record<string, string> },
): Node;
export function job(
  id: string,
  requests?: Resources,
  options?: {
    on?: string;
    submitted?: number;
    priority?: number;
    loss?: [number, number][];
    labels?: Record<string, string>;
    oneTaskPerNode?: boolean;
  },
): Job;
export function distributed(
  id: string,
  ps: number,
  workers: number,
  options?: {
    requests?: Resources;
    on?: string;
    maxWorkers?: number;
    submitted?: number;
    loss?: [number, number][];
    oneTaskPerNode?: boolean;
  },
): Job;
export function lossSeries(points?: [number, number][]): LossSeries;
export function noLossUpdates(): LossUpdates;
export function snapshot(time: number, nodes: Node[], jobs: Job[], triggers?: Trigger[]): Snapshot;
export function onlyOn(s: Snapshot, jobId: string, nodes: string[]): Snapshot;
export function withoutLoss(s: Snapshot): Snapshot;
export function resetOf(s: Snapshot, readsLoss?: boolean): SnapshotDelta;
export function delta(before: Snapshot | undefined, after: Snapshot, readsLoss?: boolean): SnapshotDelta;

export class Harness {
  constructor(policy: Policy, settings?: Record<string, string>);
  state: Uint8Array;
  configure(): Record<string, string>;
  decide(s: Snapshot, state?: Uint8Array): Decision;
  placements(d: Decision): Record<string, Record<string, string>>;
  waiting(d: Decision): string[];
}
