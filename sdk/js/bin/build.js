#!/usr/bin/env node
// Builds a policy written on this SDK into a component of the contract's
// `incremental-policy` world, with componentize-js:
//
//     node path/to/switchyard-sdk/bin/build.js app.js -o policy.wasm
//
// componentize-js runs the module in a sandbox that sees one directory tree, so relative
// imports must stay inside it. This script writes a small entry module into the nearest
// folder holding both the app and the SDK, which imports the host's `log` (a WIT import
// Node cannot load, hence not in the SDK's own modules), hands it to the SDK's log, and
// re-exports the app's `incrementalScheduler`. The WIT is the copy the SDK carries.
// HTTP and the fetch event are turned off: the sandbox offers neither.

import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const WORLD = 'incremental-policy';
const sdk = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function fail(message) {
  console.error(`error: ${message}`);
  process.exit(2);
}

function usage() {
  return 'usage: build.js APP.js -o POLICY.wasm';
}

/** The deepest folder holding both paths. */
function commonFolder(a, b) {
  const x = a.split(sep);
  const y = b.split(sep);
  let n = 0;
  while (n < x.length && n < y.length && x[n] === y[n]) n += 1;
  return x.slice(0, n).join(sep) || sep;
}

/** `./relative/path` from `folder` to `file`, with forward slashes. */
const importPath = (folder, file) => `./${relative(folder, file).split(sep).join('/')}`;

async function main() {
  let parsed;
  try {
    parsed = parseArgs({ allowPositionals: true, options: { out: { type: 'string', short: 'o' } } });
  } catch (error) {
    fail(`${error.message}\n${usage()}`);
  }
  const { values, positionals } = parsed;
  if (positionals.length !== 1 || !values.out) fail(usage());
  const app = resolve(positionals[0]);
  const out = resolve(values.out);
  if (!existsSync(app)) fail(`${positionals[0]} does not exist`);
  if (!out.endsWith('.wasm')) fail(`the output ${values.out} should end in .wasm`);

  // Loading the app in Node first catches a missing export with a clear message rather
  // than componentize-js's.
  let module;
  try {
    module = await import(pathToFileURL(app).href);
  } catch (error) {
    const hint = /outside a module|require is not defined/.test(error.message)
      ? ' (a policy is an ES module: its package.json says "type": "module")'
      : '';
    fail(`cannot load ${positionals[0]} in Node${hint}:\n${error.stack ?? error}`);
  }
  const scheduler = module.incrementalScheduler;
  if (!scheduler || ['describe', 'configure', 'decide'].some((f) => typeof scheduler[f] !== 'function')) {
    fail(`${positionals[0]} must export \`incrementalScheduler\` (export const incrementalScheduler = exportPolicy(new MyPolicy());)`);
  }

  let componentize;
  try {
    ({ componentize } = await import('@bytecodealliance/componentize-js'));
  } catch {
    fail('componentize-js is not installed: run `npm install` in the policy folder (see its README)');
  }

  const root = commonFolder(dirname(app), join(sdk, 'src'));
  if (root === sep) {
    // componentize-js cannot take the file system's root as the sandbox's.
    fail(
      `${positionals[0]} and the SDK (${sdk}) share no folder but ${sep}: put the SDK in the ` +
        'policy\'s folder (`switchyard policy sdk --lang js --dir switchyard-sdk`) and import it from there',
    );
  }
  // Named after the app, not the process: builds of two apps in one folder do not
  // clash, and a build that was killed leaves one file that the next build replaces.
  const tag = createHash('sha256').update(relative(root, app)).digest('hex').slice(0, 12);
  const entry = join(root, `.switchyard-entry-${tag}.js`);
  // The host interface is imported under the version of the WIT the SDK carries, so a
  // contract change cannot leave this script naming the previous one.
  const wit = await readFile(join(sdk, 'wit/policy.wit'), 'utf8');
  const version = /^package switchyard:policy@([^;\s]+);/m.exec(wit)?.[1];
  if (!version) fail(`${join(sdk, 'wit/policy.wit')} names no \`package switchyard:policy@VERSION;\``);
  await writeFile(
    entry,
    `import { log } from 'switchyard:policy/host@${version}';\n` +
      `import { useHostLog } from '${importPath(root, join(sdk, 'src/log.js'))}';\n` +
      `useHostLog(log);\n` +
      `export { incrementalScheduler } from '${importPath(root, app)}';\n`,
  );
  const here = process.cwd();
  try {
    process.chdir(root);
    const { component } = await componentize({
      sourcePath: entry,
      witPath: join(sdk, 'wit'),
      worldName: WORLD,
      disableFeatures: ['http', 'fetch-event'],
    });
    process.chdir(here);
    await writeFile(out, component);
  } finally {
    process.chdir(here);
    await rm(entry, { force: true });
  }
  console.log(`built ${values.out} (${statSync(out).size} bytes)`);
}

await main();
