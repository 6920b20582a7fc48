// The WIT the SDK builds with is the repository's contract: `bin/build.js` hands
// componentize-js the copy in `wit/`, so a drifted copy would build components of
// another contract.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

test("the SDK's WIT is the repository's contract", () => {
  const carried = readFileSync(new URL('../wit/policy.wit', import.meta.url), 'utf8');
  const contract = readFileSync(new URL('../../../wit/policy.wit', import.meta.url), 'utf8');
  assert.equal(carried, contract, 'copy wit/policy.wit to sdk/js/wit/');
});
