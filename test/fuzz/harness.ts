import fc, { type Arbitrary, type IAsyncProperty, type Parameters } from 'fast-check';

/**
 * Arbitraries for fuzzing the service over HTTP: malformed, oversized, duplicated, wrongly typed
 * and wrongly encoded parameters, bodies and credentials, most of them built around a valid
 * request (one good client, one bad parameter), which is where a handler's assumptions show.
 *
 * Everything that goes on the wire is already encoded here (form values percent-encoded or not,
 * raw latin1 bytes that are not UTF-8, JSON text with duplicated keys), so the test sends exactly
 * what a broken or hostile client would.
 */

// ---------------------------------------------------------------------------------------------
// How long to fuzz

export interface FuzzSettings {
  /** Cases per property. */
  runs: number;
  /** Replays a failure fast-check reported (its `seed`). */
  seed?: number;
}

/** FUZZ_RUNS cases per property (default 100: the whole suite in about 15 s); FUZZ_SEED replays a reported seed. */
export function fuzzSettings(env: NodeJS.ProcessEnv = process.env): FuzzSettings {
  const runs = positiveInteger('FUZZ_RUNS', env.FUZZ_RUNS, 100);
  const seed = env.FUZZ_SEED === undefined || env.FUZZ_SEED === '' ? undefined : Number(env.FUZZ_SEED);
  if (seed !== undefined && !Number.isInteger(seed)) throw new Error(`FUZZ_SEED must be an integer (the seed a failed run printed), got "${env.FUZZ_SEED}"`);
  return seed === undefined ? { runs } : { runs, seed };
}

function positiveInteger(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new Error(`${name} must be a whole number of cases per property, at least 1, got "${value}"`);
  return parsed;
}

/** fc.assert parameters: `share` of the run count (costly properties run fewer cases), plus regression examples. */
export function fuzzParameters<T>(settings: FuzzSettings, share = 1, examples: T[] = []): Parameters<T> {
  return {
    numRuns: Math.max(1, Math.round(settings.runs * share)),
    ...(settings.seed === undefined ? {} : { seed: settings.seed }),
    examples,
    // No shrinking: the server's state moves on with every request (a shrinking run that succeeds
    // rotates a refresh token the property no longer follows), so a shrunk case would fail for a
    // reason of its own. The first failure is reported as it happened, with the seed to replay it.
    endOnFailure: true,
    verbose: 1,
  };
}

/**
 * fc.assert with its report kept readable: counterexamples hold values of 70,000 characters, so each
 * line of the report is cut; the cause (the request and the answer that failed) is kept whole.
 */
export async function assertProperty<T>(property: IAsyncProperty<T>, parameters: Parameters<T>): Promise<void> {
  try {
    await fc.assert(property, parameters);
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    const message = error.message.split('\n').map((line) => (line.length > 800 ? `${line.slice(0, 800)}... (${line.length} chars)` : line)).join('\n');
    throw new Error(message, { cause: error.cause });
  }
}

// ---------------------------------------------------------------------------------------------
// Strings

/** Values that have broken parsers, lookups and templates elsewhere. */
const SPECIAL_VALUES = [
  '', ' ', '\0', 'a\0b', '\r\n', '\n', '\t', '\x7f', '\u2028', '\ufeff', '\ud800', '\udfff', '\ud83d', '\u202e',
  'null', 'undefined', 'true', 'false', '0', '-1', '-0', '1e400', 'NaN', 'Infinity', '0x10', '[]', '{}', '[object Object]',
  '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf',
  '%', '%00', '%ZZ', '..', '../../etc/passwd', '/', '\\', '"', "'", '`', '<', '<script>alert(1)</script>',
  "' OR '1'='1", '"; DROP TABLE users; --', '${7*7}', '<%= 7*7 %>', '{{7*7}}',
  'javascript:alert(1)', 'data:text/html,x', 'http://', 'http://127.0.0.1:9/callback#frag', '//evil.example',
  '\ufb00', '\u0130', 'e\u0301', '\ud83d\ude00', 'a'.repeat(255), 'a'.repeat(256),
];

const HUGE_LENGTHS = [2_000, 20_000, 70_000];

/** A long run of one character: over the form, JSON and header limits, or just under them. */
export const hugeText: Arbitrary<string> = fc.tuple(fc.constantFrom(...HUGE_LENGTHS), fc.constantFrom('a', '\u00e9', '%', '\ud800', '&', '\0'))
  .map(([length, char]) => char.repeat(length));

/** Any string: every code point including lone surrogates and control characters, known troublemakers, huge ones. */
export const junkText: Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 3, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 24 }) },
  { weight: 4, arbitrary: fc.constantFrom(...SPECIAL_VALUES) },
  { weight: 1, arbitrary: hugeText },
);

/** Characters Node lets a client send in a header value (and so what reaches the server): tab, 0x20-0x7e, 0x80-0xff. */
const headerChar: Arbitrary<string> = fc.oneof(
  fc.integer({ min: 0x20, max: 0x7e }),
  fc.integer({ min: 0x80, max: 0xff }),
  fc.constant(0x09),
).map((code) => String.fromCharCode(code));

/** A header value of any bytes a client can send, some of them not UTF-8. */
export const headerJunk: Arbitrary<string> = fc.oneof(
  fc.string({ unit: headerChar, maxLength: 40 }),
  fc.constantFrom('', ' ', '\t', 'null', '%FF', '\u00ff\u00fe', 'a'.repeat(8000)),
);

/** Bytes allowed raw in a request target by Node's client (0x21-0xff): raw non-UTF-8 bytes included. */
export const targetChar: Arbitrary<string> = fc.integer({ min: 0x21, max: 0xff }).map((code) => String.fromCharCode(code));

/** Percent-escapes that decode to nothing valid: truncated, non-hex, overlong, surrogates, beyond U+10FFFF, NUL. */
const BAD_ESCAPES = ['%', '%Z', '%G0', '%1', '%FF', '%C0%AF', '%C0%80', '%ED%A0%80', '%F4%90%80%80', '%E2%82', '%00', '%0A', '%0D%0A', '%uD800', '%%', '%25', '+', '%2B', '&', '=', ';', '%26', '%3D', '#'];

/** application/x-www-form-urlencoded encoding of a string's UTF-8 (a lone surrogate becomes U+FFFD, as every encoder does). */
export function formEncode(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const char = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-._~]/.test(char)) out += char;
    else if (byte === 0x20) out += '+';
    else out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** One value as it appears on the wire in a form body or query: well encoded junk, broken escapes, raw bytes. */
export const encodedJunk: Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: junkText.map(formEncode) },
  // JSON-valued parameters (claims, authorization_details, request objects) get JSON of every type.
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, 1, [], {}, { userinfo: 1 }, { userinfo: { name: 5 } }, { id_token: { acr: { values: 1 } } }, [{ type: 1 }]).map((value) => formEncode(JSON.stringify(value))) },
  {
    weight: 2,
    arbitrary: fc.array(fc.oneof(fc.constantFrom(...BAD_ESCAPES), fc.string({ unit: targetChar, maxLength: 4 }), junkText.map(formEncode)), { minLength: 1, maxLength: 5 })
      .map((parts) => parts.join('')),
  },
);

// ---------------------------------------------------------------------------------------------
// Forms and queries around a valid request

/** A name and a value, both as they go on the wire. */
export type Pair = readonly [name: string, value: string];

export type Mutation =
  | { kind: 'replace'; name: string; value: string }
  | { kind: 'drop'; name: string }
  | { kind: 'duplicate'; name: string; value: string | null }
  | { kind: 'array'; name: string; suffix: string }
  | { kind: 'add'; name: string; value: string }
  | { kind: 'rename'; name: string; to: string }
  | { kind: 'empty'; name: string }
  | { kind: 'suffix'; name: string; value: string }
  | { kind: 'truncate'; name: string; keep: number };

/** Parameter names that upset object-building parsers (qs, prototype lookups). */
const AWKWARD_NAMES = ['__proto__', 'constructor', 'prototype', 'toString', '__proto__[admin]', 'constructor[prototype][admin]', 'a[b][c]', '', '%00', '%FF', '%5B%5D', '+', 'a.b'];

/** The name as a sloppy client might spell it: another parameter to the server. */
function nameCase(name: string): Arbitrary<string> {
  const variants = [name.toUpperCase(), `${name}+`, `+${name}`, `${name}%00`, name.replace(/_/g, '-'), `${name}%20`, `${name}%FF`];
  return fc.constantFrom(...variants.filter((variant) => variant !== name));
}

/** 1-3 changes to a valid parameter set, each of which a strict server must notice or safely ignore. */
export function mutations(validNames: readonly string[], extraNames: readonly string[] = []): Arbitrary<Mutation[]> {
  const name = fc.constantFrom(...validNames);
  const mutation: Arbitrary<Mutation> = fc.oneof(
    fc.record({ kind: fc.constant('replace' as const), name, value: encodedJunk }),
    fc.record({ kind: fc.constant('drop' as const), name }),
    fc.record({ kind: fc.constant('duplicate' as const), name, value: fc.option(encodedJunk) }),
    fc.record({ kind: fc.constant('array' as const), name, suffix: fc.constantFrom('[]', '[0]', '[a]', '[][]', '[__proto__]') }),
    fc.record({ kind: fc.constant('add' as const), name: fc.oneof(fc.constantFrom(...AWKWARD_NAMES, ...extraNames), encodedJunk), value: encodedJunk }),
    name.chain((n) => fc.record({ kind: fc.constant('rename' as const), name: fc.constant(n), to: nameCase(n) })),
    fc.record({ kind: fc.constant('empty' as const), name }),
    fc.record({ kind: fc.constant('suffix' as const), name, value: encodedJunk }),
    fc.record({ kind: fc.constant('truncate' as const), name, keep: fc.nat({ max: 40 }) }),
  );
  return fc.array(mutation, { minLength: 1, maxLength: 3 });
}

/** Applies mutations to pairs (names and values already encoded). */
export function applyMutations(pairs: readonly Pair[], changes: readonly Mutation[]): Pair[] {
  let out = [...pairs];
  const valueOf = (name: string) => out.find(([n]) => n === name)?.[1] ?? '';
  for (const change of changes) {
    switch (change.kind) {
      case 'replace': out = out.map(([n, v]) => [n, n === change.name ? change.value : v]); break;
      case 'drop': out = out.filter(([n]) => n !== change.name); break;
      case 'duplicate': out.push([change.name, change.value ?? valueOf(change.name)]); break;
      case 'array': out = out.map(([n, v]) => [n === change.name ? `${n}${change.suffix}` : n, v]); break;
      case 'add': out.push([change.name, change.value]); break;
      case 'rename': out = out.map(([n, v]) => [n === change.name ? change.to : n, v]); break;
      case 'empty': out = out.map(([n, v]) => [n, n === change.name ? '' : v]); break;
      case 'suffix': out = out.map(([n, v]) => [n, n === change.name ? `${v}${change.value}` : v]); break;
      case 'truncate': out = out.map(([n, v]) => [n, n === change.name ? v.slice(0, Math.min(change.keep, Math.max(0, v.length - 1))) : v]); break;
    }
  }
  return out;
}

/** Valid parameters as encoded pairs. */
export function pairsOf(params: Record<string, string>): Pair[] {
  return Object.entries(params).map(([name, value]) => [formEncode(name), formEncode(value)]);
}

/** The wire form of pairs: `a=b&c=d`, as latin1 so raw 0x80-0xff bytes stay single (invalid UTF-8) bytes. */
export function formBytes(pairs: readonly Pair[]): Buffer {
  return Buffer.from(pairs.map(([name, value]) => `${name}=${value}`).join('&'), 'latin1');
}

/** The query string of pairs (without `?`). */
export function queryOf(pairs: readonly Pair[]): string {
  return pairs.map(([name, value]) => `${name}=${value}`).join('&');
}

export const FORM = 'application/x-www-form-urlencoded';
export const JSON_TYPE = 'application/json';

/** Content-Type values a form or JSON endpoint may receive: right, wrong, malformed, with odd charsets. */
export const contentTypes: Arbitrary<string | string[] | undefined> = fc.oneof(
  fc.constantFrom(
    FORM, `${FORM}; charset=utf-8`, `${FORM}; charset=UTF-8`, `${FORM}; charset=latin1`, `${FORM}; charset=utf-16`, `${FORM}; charset=nonsense`,
    `${FORM}; charset="utf-8"`, `${FORM};;;`, 'APPLICATION/X-WWW-FORM-URLENCODED', `${FORM}, ${JSON_TYPE}`,
    JSON_TYPE, `${JSON_TYPE}; charset=utf-16`, `${JSON_TYPE}; charset=iso-8859-1`, 'application/jwt', 'application/jose',
    'text/plain', 'text/html', 'multipart/form-data', 'multipart/form-data; boundary=x', 'application/octet-stream',
    '*/*', 'application/', '/', ';', '', ' ', 'application/x-www-form-urlencoded\u00ff',
  ),
  headerJunk,
  fc.constant(undefined),
  fc.constant<string[]>([FORM, JSON_TYPE]),
);

/** A form body: the valid parameters with changes mostly, sometimes something that is no such form at all. */
export type FormPlan = { kind: 'around'; changes: Mutation[] } | { kind: 'other'; bytes: Buffer };

export function formPlan(validNames: readonly string[], extraNames: readonly string[] = []): Arbitrary<FormPlan> {
  const other = (bytes: Arbitrary<Buffer>) => bytes.map((b): FormPlan => ({ kind: 'other', bytes: b }));
  return fc.oneof(
    { weight: 12, arbitrary: mutations(validNames, extraNames).map((changes): FormPlan => ({ kind: 'around', changes })) },
    { weight: 1, arbitrary: other(fc.array(fc.tuple(encodedJunk, encodedJunk), { maxLength: 6 }).map((pairs) => formBytes(pairs))) },
    { weight: 1, arbitrary: other(rawJsonText.map((text) => Buffer.from(text, 'utf8'))) },
    { weight: 1, arbitrary: other(fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes))) },
    { weight: 1, arbitrary: other(fc.constantFrom(Buffer.alloc(0), Buffer.from('&&&==&'), Buffer.from('a=b&'.repeat(20_000)), Buffer.from(`${'x'.repeat(70_000)}=1`))) },
  );
}

/** The bytes of a planned form body, around the valid parameters of the moment (a code, a token). */
export function formBytesOf(plan: FormPlan, valid: Record<string, string>): Buffer {
  return plan.kind === 'around' ? formBytes(applyMutations(pairsOf(valid), plan.changes)) : plan.bytes;
}

// ---------------------------------------------------------------------------------------------
// JSON

/** Values of every JSON type, including the ones a field never expects. */
export const jsonJunk: Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 3, arbitrary: junkText },
  { weight: 2, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, '', [], {}, [null], [[]], [''], { '': null }) },
  { weight: 1, arbitrary: fc.array(junkText, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(junkText, junkText, { maxKeys: 4 }) },
);

/** One key of a JSON object, with its value, as entries (so `__proto__` and duplicated keys survive to the text). */
export type Entry = readonly [key: string, value: unknown];

export type JsonMutation =
  | { kind: 'set'; key: string; value: unknown }
  | { kind: 'drop'; key: string }
  | { kind: 'add'; key: string; value: unknown }
  | { kind: 'wrap'; key: string }
  | { kind: 'duplicate'; key: string; value: unknown };

const AWKWARD_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '', ' ', '\0', '\ud800'];

/** 1-3 changes to a valid JSON object: a field of the wrong type, missing, repeated, an unknown or awkward one. */
export function jsonMutations(validKeys: readonly string[], extraKeys: readonly string[] = []): Arbitrary<JsonMutation[]> {
  const key = fc.constantFrom(...validKeys, ...extraKeys);
  const mutation: Arbitrary<JsonMutation> = fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('set' as const), key, value: jsonJunk }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('drop' as const), key }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('add' as const), key: fc.oneof(fc.constantFrom(...AWKWARD_KEYS, ...extraKeys), junkText), value: jsonJunk }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('wrap' as const), key }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('duplicate' as const), key, value: jsonJunk }) },
  );
  return fc.array(mutation, { minLength: 1, maxLength: 3 });
}

export function applyJsonMutations(entries: readonly Entry[], changes: readonly JsonMutation[]): Entry[] {
  let out = [...entries];
  for (const change of changes) {
    switch (change.kind) {
      case 'set': out = out.some(([k]) => k === change.key) ? out.map(([k, v]) => [k, k === change.key ? change.value : v]) : [...out, [change.key, change.value]]; break;
      case 'drop': out = out.filter(([k]) => k !== change.key); break;
      case 'add': out.push([change.key, change.value]); break;
      case 'wrap': out = out.map(([k, v]) => [k, k === change.key ? [v] : v]); break;
      case 'duplicate': out.push([change.key, change.value]); break;
    }
  }
  return out;
}

/** JSON text of entries, keeping duplicated and `__proto__` keys (JSON.stringify of an object would lose them). */
export function jsonText(entries: readonly Entry[]): string {
  return `{${entries.map(([key, value]) => `${JSON.stringify(key)}:${JSON.stringify(value) ?? 'null'}`).join(',')}}`;
}

/** Nesting deep enough to overflow a recursive walker, within the body limits. */
export const deepJson: Arbitrary<string> = fc.tuple(fc.constantFrom(100, 2_000, 12_000), fc.constantFrom('array', 'object', 'field'))
  .map(([depth, shape]) => {
    if (shape === 'array') return `${'['.repeat(depth)}${']'.repeat(depth)}`;
    if (shape === 'object') return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    return `{"name":${'['.repeat(depth)}${']'.repeat(depth)}}`;
  });

/** Text that is not JSON, or JSON that is not an object, or an object no schema expects. */
export const rawJsonText: Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '', ' ', '{', '}', '[', '{"a":}', "{'a':1}", '{a:1}', 'null', '"x"', '1', 'true', 'NaN', '[]', '[{}]', '{"a":1}garbage', '{"a":1}{"b":2}',
    '\ufeff{}', '{"a":"\\ud800"}', '{"a":"\\u0000"}', '{"a":1e999}', '{"a":-0}', '{"a":"\\x41"}', '{"a":01}', '{"a":.5}',
    '{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{"admin":true}}}', '{"a":1,"a":2}',
  ),
  deepJson,
  fc.string({ unit: 'binary', maxLength: 60 }),
  hugeText,
);

/** A JSON body: the valid object with changes mostly, sometimes broken text or an object of junk. */
export type JsonPlan = { kind: 'around'; changes: JsonMutation[] } | { kind: 'other'; text: string };

export function jsonPlan(validKeys: readonly string[], extraKeys: readonly string[] = []): Arbitrary<JsonPlan> {
  return fc.oneof(
    { weight: 6, arbitrary: jsonMutations(validKeys, extraKeys).map((changes): JsonPlan => ({ kind: 'around', changes })) },
    { weight: 1, arbitrary: rawJsonText.map((text): JsonPlan => ({ kind: 'other', text })) },
    { weight: 1, arbitrary: fc.dictionary(junkText, jsonJunk, { maxKeys: 5 }).map((object): JsonPlan => ({ kind: 'other', text: JSON.stringify(object) })) },
  );
}

export function jsonTextOf(plan: JsonPlan, valid: Record<string, unknown>): string {
  return plan.kind === 'around' ? jsonText(applyJsonMutations(Object.entries(valid), plan.changes)) : plan.text;
}

/** How a JSON text goes on the wire: UTF-8 mostly, else UTF-16 or latin1 bytes (which a UTF-8 reader sees as garbage). */
export function encodeText(text: string, encoding: 'utf8' | 'utf16le' | 'latin1'): Buffer {
  return Buffer.from(text, encoding);
}

export const textEncodings: Arbitrary<'utf8' | 'utf16le' | 'latin1'> = fc.oneof(
  { weight: 8, arbitrary: fc.constant('utf8' as const) },
  { weight: 1, arbitrary: fc.constant('utf16le' as const) },
  { weight: 1, arbitrary: fc.constant('latin1' as const) },
);

/** Accept header values: JSON, HTML, nonsense, malformed q-values. */
export const acceptHeaders: Arbitrary<string | undefined> = fc.oneof(
  fc.constantFrom(undefined, '*/*', 'application/json', 'text/html', 'application/jwt', 'image/png', 'text/html;q=0, application/json;q=0', 'application/json;q=abc', ';;', '*/*;q=-1', 'application/*', 'text/*, */*;q=0.1'),
  headerJunk,
);
