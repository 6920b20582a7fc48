// The component's export: `exportPolicy(policy)` gives the `incrementalScheduler`
// object componentize-js looks for in the app module, implementing the
// `incremental-scheduler` interface of `wit/policy.wit` on top of a `Policy`.
//
// It keeps the snapshot this instance holds (`Held`), applies each call's delta to it,
// resolves the settings against the policy's spec, and turns a `PolicyError` into the
// WIT `result`'s error. Native tests call the same object through `testing.Harness`, so
// what runs under `node --test` is what runs in the component.

import { PolicyError, asWitError } from './contract.js';
import { Held } from './incremental.js';
import { Cluster, Policy } from './policy.js';
import { Settings } from './settings.js';

/** The `incrementalScheduler` export for `policy`:
 *
 *     export const incrementalScheduler = exportPolicy(new LeastLoaded());
 */
export function exportPolicy(policy) {
  if (!(policy instanceof Policy)) {
    throw new TypeError(`exportPolicy() takes a Policy instance, got ${policy}`);
  }
  const held = new Held();
  const settingsOf = (given) => {
    const settings = Settings.resolve(policy.parameters, given);
    policy.check(settings);
    return settings;
  };
  const refusing = (call) => {
    try {
      return call();
    } catch (error) {
      if (error instanceof PolicyError) throw asWitError(error);
      // A bug traps the call. componentize-js would report only that the error is not
      // a string, so the error and its stack go to stderr first, which the host shows
      // with the trap ("the policy printed: ...").
      console.error(`${policy.name}: uncaught ${described(error)}`);
      throw error;
    }
  };
  return {
    describe: () => policy.describe(),
    configure: (settings) => refusing(() => settingsOf(settings).toSettings()),
    decide: (settings, change, state) =>
      refusing(() => {
        const snapshot = held.apply(change);
        return policy.decide(settingsOf(settings), new Cluster(snapshot, held), state);
      }),
  };
}

/** An error with its stack. SpiderMonkey's `stack` leaves the message out, V8's starts
 * with it. */
function described(error) {
  if (!(error instanceof Error) || !error.stack) return String(error);
  const head = String(error);
  return error.stack.startsWith(head) ? error.stack : `${head}\n${error.stack}`;
}
