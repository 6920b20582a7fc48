// Normalised evaluation series: what SpeCon's gain and FlowCon's progress are computed
// from, as in the Rust SDK's `progress` module.
//
// The papers compare the change of a job's evaluation function with a threshold given
// as a percentage, so the value is divided by a per-job scale first. The snapshot only
// carries the most recent samples, so the scale is remembered in the policy's state
// (`Scale.toJSON` / `Scale.fromJSON`). This module owns the arithmetic only; when to
// evaluate is the policy's business.

/** What a job's evaluation values are divided by: `initial` (the first non-zero value
 * seen for the job) or `max` (the largest |value| seen so far). */
export const Normalisation = Object.freeze({ INITIAL: 'initial', MAX: 'max' });

/** One of `initial`, `max`; undefined for anything else. */
export function parseNormalisation(word) {
  return Object.values(Normalisation).includes(word) ? word : undefined;
}

/** The per-job divisor, kept in the policy's state between calls. */
export class Scale {
  /** @param {number | undefined} base */
  constructor(base = undefined) {
    this.base = base;
  }

  /** Takes the job's current samples into account (idempotent for repeats). */
  observe(mode, samples) {
    // An initial base never changes, and policies call this for every job every round.
    if (mode === Normalisation.INITIAL && this.base !== undefined) return;
    for (const value of samples.values) {
      const magnitude = Math.abs(value);
      if (!Number.isFinite(magnitude) || magnitude === 0) continue;
      if (mode === Normalisation.INITIAL) {
        this.base = magnitude;
        return;
      }
      this.base = this.base === undefined ? magnitude : Math.max(this.base, magnitude);
    }
  }

  /** `value / base`, or undefined until a non-zero value has been seen. */
  normalise(value) {
    return this.base === undefined ? undefined : value / this.base;
  }

  toJSON() {
    return this.base ?? null;
  }

  static fromJSON(value) {
    return new Scale(value == null ? undefined : Number(value));
  }
}

/** The evaluation value as of `time`: the latest sample taken at or before it (the
 * papers: "when queried in the middle of an iteration, the previous value is
 * returned"). */
export function valueAt(samples, time) {
  const { times, values } = samples;
  for (let i = times.length - 1; i >= 0; i -= 1) {
    if (times[i] <= time + 1e-9) return values[i];
  }
  return undefined;
}

/** SpeCon's gain: the magnitude of the change of the normalised evaluation value
 * between its values as of `since` and as of `now`. Undefined while either end has no
 * value yet or the scale has seen no non-zero value. */
export function gain(scale, samples, since, now) {
  const before = valueAt(samples, since);
  const after = valueAt(samples, now);
  if (before === undefined || after === undefined) return undefined;
  const a = scale.normalise(before);
  const b = scale.normalise(after);
  return a === undefined || b === undefined ? undefined : Math.abs(b - a);
}
