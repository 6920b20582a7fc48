// The policy's state blob: whatever the policy wants to remember, as JSON bytes.
//
// JSON, as the Rust and Python SDKs write it, so an operator can read a persisted state
// file when a policy misbehaves, whichever language wrote it. The blob is the only
// memory a policy has: the host may start a fresh instance at any time, and anything
// kept in a module variable is then gone without notice.

import { PolicyError } from './contract.js';

function sorted(value) {
  if (Array.isArray(value)) return value.map(sorted);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sorted(value[k])]));
  }
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new PolicyError(`cannot encode the policy state: ${value} is not a JSON number`);
  }
  return value;
}

/** The blob for `value` (anything JSON holds). Keys are sorted, so equal states give
 * equal blobs; numbers read back exactly. */
export function encode(value) {
  return new TextEncoder().encode(JSON.stringify(sorted(value)));
}

/** The value in the blob the host passed in; `fallback()` for an empty blob (the first
 * call). A blob that is not JSON is refused with a message naming the fault.
 * @template T @param {Uint8Array} blob @param {() => T} fallback @returns {T} */
export function decode(blob, fallback) {
  if (!blob || blob.length === 0) return fallback();
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(blob));
  } catch (error) {
    throw new PolicyError(`cannot decode the policy state: ${error.message}`);
  }
}
