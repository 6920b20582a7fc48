// The contract's types as componentize-js passes them, and the one refusal a policy raises.
//
// componentize-js lifts the WIT types of `wit/policy.wit` into plain objects with
// camelCase fields (`cpuMillis`, `submitTime`), enums as their kebab-case names
// (`'pending'`), variants as `{ tag, val }` and `option<T>` as the value or `undefined`.
// Its `u64` arrives as a BigInt; the SDK turns the resource amounts and loss steps into
// plain numbers once, where a changed node or job enters the held snapshot
// (`toNumbers`), so policy code does arithmetic on numbers (exact below 2^53: 8 PiB of
// memory). Lists of numbers arrive as typed arrays (`Float64Array`, `BigUint64Array`,
// `Uint32Array`); a job's loss series is held as plain arrays, which a loss update
// grows. `index.d.ts` declares every type.

/** A refusal the operator reads: bad settings in `configure`, an undecidable round in
 * `decide`. The binding hands its message to the host as the WIT `result`'s error (a
 * `Refused` on the host's side); any other exception traps the call. */
export class PolicyError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'PolicyError';
  }
}

/** The error componentize-js turns into the `err` of a WIT `result`: it takes a thrown
 * object's `payload` as the error value. */
export function asWitError(error) {
  return { payload: error.message };
}

const MAX_EXACT = BigInt(Number.MAX_SAFE_INTEGER);

/** A u64 from the host as a number; refused when a number cannot hold it exactly. */
export function exact(value, what) {
  if (typeof value !== 'bigint') return value;
  if (value > MAX_EXACT) {
    throw new PolicyError(`${what} ${value} is beyond what the JavaScript SDK holds exactly (2^53)`);
  }
  return Number(value);
}

function resourcesToNumbers(r) {
  if (r == null) return r;
  r.cpuMillis = exact(r.cpuMillis, 'cpu-millis');
  r.memoryBytes = exact(r.memoryBytes, 'memory-bytes');
  return r;
}

/** Converts a node's u64 fields in place (see the module comment). */
export function nodeToNumbers(node) {
  resourcesToNumbers(node.allocatable);
  resourcesToNumbers(node.requested);
  resourcesToNumbers(node.usage);
  return node;
}

/** The number of samples in `series`, whose three columns must be as long as each
 * other; `whose` begins the refusal. */
export function seriesLength(series, whose) {
  const count = series.times.length;
  if (series.steps.length !== count || series.values.length !== count) {
    throw new PolicyError(
      `${whose}a loss series has ${count} times, ${series.steps.length} steps and ${series.values.length} values`,
    );
  }
  return count;
}

/** A job's loss series as the SDK holds it: three plain arrays of numbers. One indexed
 * loop rather than `Array.from`, which walks an iterator per element in the engine's
 * interpreter (a reset converts every job's series). */
function seriesToNumbers(series, whose) {
  const count = seriesLength(series, whose);
  const { times: fromTimes, steps: fromSteps, values: fromValues } = series;
  const times = new Array(count);
  const steps = new Array(count);
  const values = new Array(count);
  for (let i = 0; i < count; i += 1) {
    times[i] = fromTimes[i];
    const step = fromSteps[i];
    steps[i] = typeof step === 'bigint' ? exact(step, 'loss step') : step;
    values[i] = fromValues[i];
  }
  return { times, steps, values };
}

/** Converts a job's u64 fields (task requests and usage, loss steps) in place, and its
 * loss series into arrays. */
export function jobToNumbers(job) {
  for (const task of job.tasks) {
    resourcesToNumbers(task.requests);
    resourcesToNumbers(task.usage);
  }
  job.loss = seriesToNumbers(job.loss, `job \`${job.id}\`: `);
  return job;
}
