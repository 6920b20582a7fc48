// Policy parameters: a spec with defaults and docs, checked once, read typed.
//
// The host hands the effective settings to every `decide` call, so a policy never
// stores them; it resolves them against its spec each time (a few string compares). The
// messages are the Rust SDK's, so an operator reads the same sentence whatever language
// the policy is written in.

import { PolicyError } from './contract.js';

/** Settings resolved against a spec: every parameter present, unknown names refused. */
export class Settings {
  /** @param {Map<string, string>} values */
  constructor(values) {
    this.values = values;
  }

  /** Fills defaults and refuses names the spec does not know, listing those it does.
   * @param {{name: string, default: string, doc: string}[]} spec
   * @param {{name: string, value: string}[]} given */
  static resolve(spec, given) {
    const known = spec.map((p) => p.name);
    for (const setting of given) {
      if (!known.includes(setting.name)) {
        const accepts = known.length ? known.join(', ') : 'none';
        throw new PolicyError(`unknown parameter \`${setting.name}\`; this policy accepts: ${accepts}`);
      }
    }
    const values = new Map(spec.map((p) => [p.name, p.default]));
    for (const setting of given) values.set(setting.name, setting.value.trim()); // the last wins
    return new Settings(values);
  }

  /** The effective settings in WIT form, for `configure`'s answer. */
  toSettings() {
    return [...this.values].map(([name, value]) => ({ name, value }));
  }

  #raw(name) {
    const value = this.values.get(name);
    if (value === undefined) throw new Error(`parameter \`${name}\` is not in the policy's spec`);
    return value;
  }

  /** A parameter as written (trimmed), for values the policy parses itself. */
  text(name) {
    return this.#raw(name);
  }

  /** A finite floating-point parameter. */
  float(name) {
    const raw = this.#raw(name);
    // Number('') is 0 and Number('0x10') is 16: accept only what a decimal float reads.
    const value = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isFinite(value)) throw new PolicyError(`parameter \`${name}\` must be a number, got \`${raw}\``);
    return value;
  }

  /** A floating-point parameter within `[low, high]`. */
  floatIn(name, low, high) {
    const value = this.float(name);
    if (value < low || value > high) {
      throw new PolicyError(`parameter \`${name}\` must be between ${low} and ${high}, got ${value}`);
    }
    return value;
  }

  /** A boolean parameter (`true`/`false`). */
  bool(name) {
    const raw = this.#raw(name);
    if (raw === 'true' || raw === 'false') return raw === 'true';
    throw new PolicyError(`parameter \`${name}\` must be true or false, got \`${raw}\``);
  }

  /** A parameter that must be one of a fixed set of words. */
  choice(name, allowed) {
    const raw = this.#raw(name);
    if (!allowed.includes(raw)) {
      throw new PolicyError(`parameter \`${name}\` must be one of ${allowed.join(', ')}, got \`${raw}\``);
    }
    return raw;
  }
}
