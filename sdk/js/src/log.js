// The host's log, usable from native tests too.
//
// In a component a line goes to the controller's log, tagged with the policy's name: the
// component's entry module (written by `bin/build.js`) imports the host's `log` and
// hands it to `useHostLog`. Under `node --test` there is no host: lines are kept in
// `captured` ({ level, message }) so a test can assert on what a policy said.

/** Lines logged outside a component, oldest first. */
export const captured = [];

let write = (level, message) => {
  captured.push({ level, message });
};

/** Sends every line to `hostLog(level, message)` (the WIT import) from now on. */
export function useHostLog(hostLog) {
  write = hostLog;
}

export const trace = (message) => write('trace', message);
export const debug = (message) => write('debug', message);
export const info = (message) => write('info', message);
export const warn = (message) => write('warn', message);
export const error = (message) => write('error', message);
