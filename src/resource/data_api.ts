import { bodyParser } from '@koa/bodyparser';
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import compose from 'koa-compose';

import type { RecordStore } from '../../adapters/store.ts';
import { authenticate, type Authenticators } from './authenticate.ts';
import { bearerCors } from './cors.ts';
import { ApiError, notFound } from '../shared/http_error.ts';
import { MetadataApi } from './metadata.ts';
import { objectNamed, type ObjectDefinition } from './objects.ts';
import { CoreApi, OBJECT_NAMES } from './records.ts';

/** The largest request body the data API reads. */
const BODY_LIMIT = '64kb';

export interface DataApiDependencies extends Authenticators {
  records: RecordStore;
  /** Where the API is mounted: `{issuer path}/rest`. */
  restPath: string;
  /** Runs once the request is authenticated (`ctx.state.principal`): the per-credential rate limit. */
  rateLimit?: Middleware;
}

/**
 * The data APIs, the protected resource the tokens are for: the Metadata API under
 * /rest/metadata/ (read-only: the object types are fixed) and the Core API under /rest/.
 * CORS first (a preflight carries no credential), then errors as JSON, then authentication of
 * every request, its rate limit, then the routes.
 */
export function dataApi(deps: DataApiDependencies): Middleware {
  const core = new CoreApi(deps.records);
  const metadata = new MetadataApi(deps.restPath);
  const router = new Router({ prefix: deps.restPath });

  router.get('/metadata/objects', (ctx) => { ctx.body = metadata.list(); });
  router.get('/metadata/objects/:id', (ctx) => { ctx.body = metadata.get(ctx.params.id!); });
  const readOnly = () => { throw methodNotAllowed('GET', 'the Metadata API is read-only: the object types and their fields are fixed'); };
  router.all('/metadata/objects', readOnly);
  router.all('/metadata/objects/:id', readOnly);

  const json = jsonBody();
  router.get('/:object', (ctx) => core.list(ctx, object(ctx)));
  router.post('/:object', json, (ctx) => core.create(ctx, object(ctx)));
  router.get('/:object/:id', (ctx) => core.get(ctx, object(ctx), ctx.params.id!));
  router.patch('/:object/:id', json, (ctx) => core.update(ctx, object(ctx), ctx.params.id!));
  router.delete('/:object/:id', (ctx) => core.delete(ctx, object(ctx), ctx.params.id!));
  router.all('/:object', (ctx) => { object(ctx); throw methodNotAllowed('GET, POST', 'a collection is listed (GET) or added to (POST)'); });
  router.all('/:object/:id', (ctx) => { object(ctx); throw methodNotAllowed('GET, PATCH, DELETE', 'a record is read (GET), changed (PATCH) or deleted (DELETE)'); });

  return compose([
    bearerCors('GET, POST, PATCH, DELETE'),
    apiErrors,
    noStore,
    authenticate(deps),
    ...(deps.rateLimit ? [deps.rateLimit] : []),
    router.routes() as Middleware,
    unknownPath,
  ]);
}

function object(ctx: Context): ObjectDefinition {
  const found = objectNamed(ctx.params.object!);
  if (!found) throw notFound(`no object named ${ctx.params.object!.slice(0, 64)}; objects: ${OBJECT_NAMES}`);
  return found;
}

function methodNotAllowed(allow: string, description: string): ApiError {
  return new ApiError(405, 'method_not_allowed', description, { Allow: allow });
}

/** POST and PATCH bodies: JSON objects only, at most BODY_LIMIT. */
function jsonBody(): Middleware {
  const parse = bodyParser({ enableTypes: ['json'], jsonLimit: BODY_LIMIT, jsonStrict: true });
  return async (ctx, next) => {
    if (!ctx.is('application/json')) throw new ApiError(415, 'unsupported_media_type', 'send the body as JSON (Content-Type: application/json)');
    await parse(ctx, next);
  };
}

const noStore: Middleware = async (ctx, next) => {
  ctx.set('Cache-Control', 'no-store');
  await next();
};

const unknownPath: Middleware = async () => {
  throw notFound(`no such data API path; objects: ${OBJECT_NAMES}`);
};

/** ApiError and the body parser's refusals as JSON 4xx; anything else goes on to the host's error mapping (503, 500). */
const apiErrors: Middleware = async (ctx, next) => {
  try {
    await next();
  } catch (error) {
    const refusal = error instanceof ApiError ? error : bodyRefusal(error);
    if (!refusal) throw error;
    ctx.status = refusal.status;
    for (const [name, value] of Object.entries(refusal.headers)) ctx.set(name, value);
    ctx.body = { error: refusal.code, error_description: refusal.message };
  }
};

function bodyRefusal(error: unknown): ApiError | undefined {
  const status = (error as { status?: unknown } | null)?.status;
  if (status === 413) return new ApiError(413, 'payload_too_large', `the body is larger than ${BODY_LIMIT}`);
  if (status === 415) return new ApiError(415, 'unsupported_media_type', 'send the body as JSON (Content-Type: application/json)');
  if (typeof status === 'number' && status >= 400 && status < 500) return new ApiError(400, 'invalid_request', 'the body is not a valid JSON object');
  return undefined;
}
