// Settings, normalised progress and the state blob: the Rust SDK's rules and messages.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { PolicyError } from '../src/contract.js';
import { Normalisation, Scale, gain, parseNormalisation, valueAt } from '../src/progress.js';
import { Settings } from '../src/settings.js';
import { decode, encode } from '../src/state.js';
import { lossSeries } from '../src/testing.js';

const SPEC = [
  { name: 'alpha', default: '0.1', doc: 'a threshold' },
  { name: 'fast', default: 'false', doc: 'a switch' },
  { name: 'mode', default: 'initial', doc: 'a choice' },
];
const given = (pairs) => Object.entries(pairs).map(([name, value]) => ({ name, value }));

test('defaults fill in, the last setting of a name wins and values are trimmed', () => {
  const s = Settings.resolve(SPEC, given({ alpha: ' 0.5 ' }).concat(given({ alpha: '0.25' })));
  assert.equal(s.float('alpha'), 0.25);
  assert.equal(s.bool('fast'), false);
  assert.deepEqual(s.toSettings().map((x) => x.name), ['alpha', 'fast', 'mode']);
});

test('unknown names and bad values are refused with the Rust SDK messages', () => {
  assert.throws(() => Settings.resolve(SPEC, given({ alhpa: '1' })), new PolicyError('unknown parameter `alhpa`; this policy accepts: alpha, fast, mode'));
  assert.throws(() => Settings.resolve([], given({ x: '1' })), new PolicyError('unknown parameter `x`; this policy accepts: none'));
  const bad = Settings.resolve(SPEC, given({ alpha: 'lots', fast: 'yes', mode: 'fastest' }));
  assert.throws(() => bad.float('alpha'), new PolicyError('parameter `alpha` must be a number, got `lots`'));
  assert.throws(() => bad.bool('fast'), new PolicyError('parameter `fast` must be true or false, got `yes`'));
  assert.throws(() => bad.choice('mode', ['initial', 'max']), new PolicyError('parameter `mode` must be one of initial, max, got `fastest`'));
  for (const odd of ['', '0x10', 'Infinity', 'NaN', '1e999']) {
    assert.throws(() => Settings.resolve(SPEC, given({ alpha: odd })).float('alpha'), PolicyError, `accepted \`${odd}\``);
  }
  assert.throws(() => Settings.resolve(SPEC, given({ alpha: '2' })).floatIn('alpha', 0, 1), new PolicyError('parameter `alpha` must be between 0 and 1, got 2'));
  assert.throws(() => bad.text('nothing'), /not in the policy's spec/);
});

test('the scale and gain follow the papers', () => {
  const samples = lossSeries([
    [0, 0],
    [10, 4],
    [20, 2],
  ]);
  const initial = new Scale();
  initial.observe(Normalisation.INITIAL, samples);
  assert.equal(initial.base, 4, 'the first non-zero value');
  initial.observe(Normalisation.INITIAL, lossSeries([[30, 100]]));
  assert.equal(initial.base, 4, 'an initial base never changes');
  const max = new Scale();
  max.observe(Normalisation.MAX, lossSeries([[0, 0], [10, 4], [20, 2], [30, -8]]));
  assert.equal(max.base, 8);
  assert.equal(valueAt(samples, 15), 4);
  assert.equal(valueAt(samples, -1), undefined);
  assert.equal(gain(initial, samples, 10, 20), 0.5);
  assert.equal(gain(new Scale(), samples, 10, 20), undefined);
  assert.equal(Scale.fromJSON(JSON.parse(JSON.stringify(initial))).base, 4);
  assert.equal(Scale.fromJSON(JSON.parse(JSON.stringify(new Scale()))).base, undefined);
  assert.equal(parseNormalisation('max'), 'max');
  assert.equal(parseNormalisation('mean'), undefined);
});

test('the state blob is sorted JSON that reads back, and a broken one is refused', () => {
  const blob = encode({ b: [1.5, 0.1], a: { z: 1, y: null } });
  assert.equal(new TextDecoder().decode(blob), '{"a":{"y":null,"z":1},"b":[1.5,0.1]}');
  assert.deepEqual(decode(blob, () => ({})), { a: { y: null, z: 1 }, b: [1.5, 0.1] });
  assert.deepEqual(decode(new Uint8Array(), () => 'first'), 'first');
  assert.throws(() => decode(new Uint8Array([123, 255]), () => 0), /cannot decode the policy state/);
  assert.throws(() => encode({ x: NaN }), new PolicyError('cannot encode the policy state: NaN is not a JSON number'));
});
