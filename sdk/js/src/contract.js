// The contract's types as componentize-js passes them, and the one refusal a policy raises.
//
// componentize-js lifts the WIT types of `wit/policy.wit` into plain objects with
// camelCase fields (`cpuMillis`, `submitTime`), enums as their kebab-case names
// (`'pending'`), variants as `{ tag, val }` and `option<T>` as the value or `undefined`.
// Its `u64` arrives as a BigInt; the SDK turns the resource amounts and loss steps into
// plain numbers once, where a changed node or job enters the held snapshot
// (`toNumbers`), so policy code does arithmetic on numbers (exact below 2^53: 8 PiB of
// memory). `index.d.ts` declares every type.

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

/** A u64 from the host as a number; refused when a number cannot hold it exactly. */
function exact(value, what) {
  if (typeof value !== 'bigint') return value;
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) {
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

/** Converts a loss sample's step in place. */
export function sampleToNumbers(sample) {
  if (typeof sample.step === 'bigint') sample.step = exact(sample.step, 'loss step');
  return sample;
}

/** Converts a job's u64 fields (task requests and usage, loss steps) in place. */
export function jobToNumbers(job) {
  for (const task of job.tasks) {
    resourcesToNumbers(task.requests);
    resourcesToNumbers(task.usage);
  }
  for (const sample of job.loss) sampleToNumbers(sample);
  return job;
}
