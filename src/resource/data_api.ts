import Bourne from '@hapi/bourne';
import { bodyParser } from '@koa/bodyparser';
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import compose from 'koa-compose';

import type { RecordStore } from '../../adapters/store.ts';
import { authenticate, type Authenticators } from './authenticate.ts';
import { bearerCors } from './cors.ts';
import { HttpError, notFound, unreadableBodyStatus } from '../shared/http_error.ts';
import { noStore } from '../shared/no_store.ts';
import { withNormalPercentEncoding } from '../shared/percent_encoding.ts';
import { idempotencyKeyOf, type IdempotentCreates } from './idempotency.ts';
import { MetadataApi } from './metadata.ts';
import { OBJECTS, type ObjectDefinition } from './objects.ts';
import { refuseUnknownListParameters, takesNoQuery } from './query_parameters.ts';
import { canWriteRecords, type Principal } from './principal.ts';
import { CoreApi, OBJECT_NAMES } from './records.ts';

/** The largest request body the data API reads. */
const BODY_LIMIT = '64kb';

/** The methods each kind of path takes (HEAD with GET), for `Allow` and a browser's preflight. */
const METADATA_METHODS = 'GET, HEAD';
const COLLECTION_METHODS = 'GET, HEAD, POST';
const RECORD_METHODS = 'GET, HEAD, PATCH, DELETE';

export interface DataApiDependencies extends Authenticators {
  records: RecordStore;
  /** How creates under an idempotency key are kept (keys derived from the key-encryption keys). */
  idempotentCreates: IdempotentCreates;
  /** Where the API is mounted: `{issuer path}/rest`. */
  restPath: string;
  /** Runs once the request is authenticated (`ctx.state.principal`): the per-credential rate limit. */
  rateLimit?: Middleware;
}

/**
 * The data APIs, the protected resource the tokens are for: the Metadata API under
 * /rest/metadata/ (read-only: the object types are fixed) and the Core API under /rest/.
 * CORS first (a preflight carries no credential), then authentication of every request, its
 * rate limit, then the routes; a refusal is an HttpError, which the host answers as JSON.
 */
export function dataApi(deps: DataApiDependencies): Middleware {
  const core = new CoreApi(deps.records, deps.idempotentCreates);
  const metadata = new MetadataApi(deps.restPath);
  // Object names are lower case, and `/rest/Companies` is not `/rest/companies` (RFC 3986 6.2.2.1).
  const router = new Router({ prefix: deps.restPath, sensitive: true });
  // Every path under /rest matches one of the routes below, so every request is authenticated
  // (and counted under the route that matched) before anything else is said about it.
  router.use(authenticate(deps));
  if (deps.rateLimit) router.use(deps.rateLimit);

  router.get('/metadata/objects', takesNoQuery, (ctx) => { ctx.body = metadata.list(); });
  router.get('/metadata/objects/:id', takesNoQuery, (ctx) => { ctx.body = metadata.get(ctx.params.id!); });
  const readOnly = () => { throw methodNotAllowed(METADATA_METHODS, 'the Metadata API is read-only: the object types and their fields are fixed'); };
  router.all('/metadata/objects', readOnly);
  router.all('/metadata/objects/:id', readOnly);

  // One route per object type, so each is counted under its own template (`/rest/companies/:id`).
  const json = jsonBody();
  for (const object of OBJECTS) {
    const collection = `/${object.namePlural}`;
    const record = `${collection}/:id`;
    router.get(collection, async (ctx) => {
      refuseUnknownListParameters(Object.keys(ctx.query));
      ctx.body = await core.list(principalOf(ctx), object, { limit: ctx.query.limit, startingAfter: ctx.query.starting_after });
    });
    router.post(collection, json, takesNoQuery, async (ctx) => {
      const created = await core.create(principalOf(ctx), object, ctx.request.body, idempotencyKeyOf(ctx.headers['idempotency-key']));
      ctx.status = 201;
      ctx.set('Location', `${ctx.path.replace(/\/$/, '')}/${created.id}`);
      if (created.replayed) ctx.set('Idempotent-Replayed', 'true');
      ctx.body = created.body;
    });
    router.get(record, takesNoQuery, async (ctx) => {
      const found = await core.get(principalOf(ctx), object, ctx.params.id!);
      if (answeredByCondition(ctx)) return;
      ctx.body = found;
    });
    router.patch(record, json, takesNoQuery, async (ctx) => {
      await refuseUnmatchableCondition(ctx, core, object);
      ctx.body = await core.update(principalOf(ctx), object, ctx.params.id!, ctx.request.body);
    });
    router.delete(record, takesNoQuery, async (ctx) => {
      await refuseUnmatchableCondition(ctx, core, object);
      ctx.body = await core.delete(principalOf(ctx), object, ctx.params.id!);
    });
    router.all(collection, () => { throw methodNotAllowed(COLLECTION_METHODS, 'a collection is listed (GET) or added to (POST)'); });
    router.all(record, () => { throw methodNotAllowed(RECORD_METHODS, 'a record is read (GET), changed (PATCH) or deleted (DELETE)'); });
  }
  router.all(['/:object', '/:object/:id'], (ctx) => { throw notFound(`no object named ${ctx.params.object!.slice(0, 64)}; objects: ${OBJECT_NAMES}`); });
  router.all(['/', '/{*path}'], () => { throw notFound(`no such data API path; objects: ${OBJECT_NAMES}`); });

  const metadataPath = `${deps.restPath}/metadata/`;
  const methodsAt = (path: string) => {
    if (path.startsWith(metadataPath) || path === `${deps.restPath}/metadata`) return METADATA_METHODS;
    const segments = path.slice(deps.restPath.length + 1).split('/').filter(Boolean);
    return segments.length === 2 ? RECORD_METHODS : COLLECTION_METHODS;
  };
  return compose([
    unreservedCharactersDecoded,
    bearerCors((ctx) => methodsAt(ctx.newRouterPath ?? ctx.path)),
    async (ctx, next) => {
      noStore(ctx);
      await next();
    },
    router.routes() as Middleware,
  ]);
}

/** The principal authenticate() left; the routes run only behind it. */
function principalOf(ctx: Context): Principal {
  const { principal } = ctx.state;
  if (!principal) throw new Error('the data API ran without an authenticated principal');
  return principal;
}

/**
 * Records carry no entity tags, so an `If-Match` listing tags never holds (RFC 9110 section
 * 13.1.1), and `If-None-Match: *` never holds for a record that is there (section 13.1.2): the
 * change is refused with 412 rather than made, and a client that means to change only the version
 * it read never overwrites another's change unknowingly. As RFC 9110 section 13.2.1 asks, the
 * condition counts only for a request that would otherwise succeed: a record that is not there is
 * still 404, and a viewer still 403. `If-Match: *` (the record exists) holds whenever the change
 * can be made at all, and so does an `If-None-Match` listing tags.
 */
async function refuseUnmatchableCondition(ctx: Context, core: CoreApi, object: ObjectDefinition): Promise<void> {
  const refusal = unmatchableCondition(ctx);
  const principal = principalOf(ctx);
  if (!refusal || !canWriteRecords(principal)) return;
  await core.get(principal, object, ctx.params.id!);
  throw new HttpError(412, 'precondition_failed', refusal);
}

/**
 * A read's precondition, for a record that is there (RFC 9110 section 13.2.2): an `If-Match`
 * naming a tag never holds, 412; `If-None-Match: *` does not hold either, which a GET answers 304
 * Not Modified (the client has the record, whatever it holds). True when the answer is given.
 */
function answeredByCondition(ctx: Context): boolean {
  const ifMatch = ctx.get('If-Match').trim();
  if (ifMatch && ifMatch !== '*') {
    throw new HttpError(412, 'precondition_failed', 'records carry no entity tags, so an If-Match naming one never holds (send the request without If-Match, or with If-Match: *)');
  }
  if (ctx.get('If-None-Match').trim() !== '*') return false;
  ctx.status = 304;
  return true;
}

/** Why the request's precondition cannot hold for a record that exists, if it cannot. */
function unmatchableCondition(ctx: Context): string | undefined {
  const ifMatch = ctx.get('If-Match').trim();
  if (ifMatch && ifMatch !== '*') return 'records carry no entity tags, so an If-Match naming one never holds: nothing was changed (send the request without If-Match, or with If-Match: *)';
  if (ctx.get('If-None-Match').trim() === '*') return 'If-None-Match: * holds only for a record that does not exist, and this one does: nothing was changed';
  return undefined;
}

function methodNotAllowed(allow: string, description: string): HttpError {
  return new HttpError(405, 'method_not_allowed', description, { Allow: allow });
}

/**
 * Routes a path as RFC 3986 section 6.2.2 makes it the same path (`/rest/%63ompanies` is
 * `/rest/companies`; withNormalPercentEncoding). Any other escape (`%2F` among them) stays an escape.
 */
const unreservedCharactersDecoded: Middleware = (ctx, next) => {
  const normal = withNormalPercentEncoding(ctx.path);
  if (normal !== ctx.path) ctx.newRouterPath = normal;
  return next();
};

/**
 * POST and PATCH bodies: JSON objects only, at most BODY_LIMIT, in UTF-8 (RFC 8259 section 8.1).
 * The body parser reads the bytes (a content coding decoded, the limit kept) as Latin-1, one
 * character a byte, and they are decoded here strictly: read as UTF-8 by the parser, bytes that are
 * not would have become U+FFFD and been stored so. A byte order mark is ignored, as RFC 8259 lets
 * a parser do.
 */
function jsonBody(): Middleware {
  const read = bodyParser({ enableTypes: ['text'], extendTypes: { text: ['application/json'] }, textLimit: BODY_LIMIT, encoding: 'latin1' });
  return async (ctx, next) => {
    // The header (in any case, RFC 9110 8.3.1), not ctx.is(), which says nothing of a request without a body.
    if (ctx.request.type.trim().toLowerCase() !== 'application/json') throw new HttpError(415, 'unsupported_media_type', 'send the body as JSON (Content-Type: application/json)');
    // Content codings are named in any case (RFC 9110 section 8.4.1); the parser knows them in lower case.
    const coding = ctx.req.headers['content-encoding'];
    if (coding !== undefined) ctx.req.headers['content-encoding'] = coding.trim().toLowerCase();
    try {
      await read(ctx, async () => undefined);
    } catch (error) {
      throw bodyRefusal(error) ?? error;
    }
    const text = utf8(Buffer.from(ctx.request.rawBody ?? '', 'latin1'));
    if (text === undefined) throw new HttpError(400, 'invalid_request', 'the body is not UTF-8, which JSON is sent in (RFC 8259 section 8.1)');
    if (text === '') throw new HttpError(400, 'invalid_request', 'the body is empty: send a JSON object');
    ctx.request.rawBody = text;
    ctx.request.body = parsedJson(text);
    await next();
  };
}

/** Decodes UTF-8 strictly, dropping a byte order mark. */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The bytes read as UTF-8; undefined when they are not UTF-8. */
function utf8(bytes: Buffer): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** A JSON text that opens as an object or an array (RFC 8259's whitespace before it). */
const OBJECT_OR_ARRAY = /^[\x20\x09\x0a\x0d]*[[{]/;

/** The body as JSON: an object or an array (what the record is then checked for), never one naming `__proto__` (prototype poisoning). */
function parsedJson(text: string): unknown {
  const refused = new HttpError(400, 'invalid_request', 'the body is not a valid JSON object');
  if (!OBJECT_OR_ARRAY.test(text)) throw refused;
  try {
    return Bourne.parse(text, { protoAction: 'error' }) as unknown;
  } catch (error) {
    // Valid JSON naming no field: its own answer.
    if (error instanceof SyntaxError && /prototype property/.test(error.message)) throw new HttpError(400, 'invalid_request', '__proto__: no object has such a field');
    throw refused;
  }
}

/** The content codings the body parser decodes (besides identity). */
const READ_CODINGS = 'gzip, deflate, br';

/** What the body parser refuses, in the data API's words. */
function bodyRefusal(error: unknown): HttpError | undefined {
  // A body that cannot be decoded (a Content-Encoding its bytes do not match) has no status of its own.
  const status = unreadableBodyStatus(error);
  if (status === 413) return new HttpError(413, 'payload_too_large', `the body is larger than ${BODY_LIMIT}`);
  // The type was checked before: the parser's 415 is a content coding it does not decode (RFC 9110 section 15.5.16).
  if (status === 415) return new HttpError(415, 'unsupported_media_type', `the body is in a content coding this API does not read; send it unencoded, or in ${READ_CODINGS}`, { 'Accept-Encoding': READ_CODINGS });
  if (status !== undefined) return new HttpError(400, 'invalid_request', 'the body is not a valid JSON object');
  return undefined;
}
