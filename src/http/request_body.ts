import type { IncomingMessage } from 'node:http';

import type { Middleware } from 'koa';

import { isEncodedBody } from '../shared/content_coding.ts';
import { HttpError } from '../shared/http_error.ts';

/*
 * The host reads a few request bodies before the engine (a token request's form, an RFC 7592
 * update's client_secret) without taking them from it: the engine reads the request stream itself,
 * and given a body parsed upstream it falls back to that with a plain-text warning on stderr.
 */

/**
 * Reads the whole body, up to `limit` bytes, and puts it back at the front of the request stream,
 * so the engine reads it as if it had never been touched (its own limits and length checks
 * included). The last chunk is read and the body put back in one synchronous step: the stream's
 * end is only announced on a later tick, and by then it has data again. Undefined (and nothing
 * read) for a body declared larger than `limit`, or empty. A body that grows past `limit` while
 * being read is put back as far as it was read (longer than `limit`: the caller refuses it, or the
 * engine does). A request whose client goes away before the body ends is refused here, as the
 * engine would find nothing to read.
 */
export async function peekBody(req: IncomingMessage, declaredLength: number | undefined, limit: number): Promise<Buffer | undefined> {
  if (declaredLength !== undefined && (declaredLength === 0 || declaredLength > limit)) return undefined;
  if (req.complete && req.readableLength === 0) return undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  for (;;) {
    if (req.readableLength > 0) {
      const chunk = req.read() as Buffer | null;
      if (chunk) {
        chunks.push(chunk);
        size += chunk.length;
      }
    }
    if ((req.complete && req.readableLength === 0) || size > limit || req.destroyed) break;
    await readableOrGone(req);
  }
  // The client went away mid-body: nothing is left for the engine to read, and no one to answer.
  if (req.destroyed) throw new HttpError(400, 'invalid_request', 'the request ended before its body did');
  const body = Buffer.concat(chunks, size);
  if (size > 0) req.unshift(body);
  return body;
}

function readableOrGone(req: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      req.off('readable', done);
      req.off('close', done);
      req.off('error', done);
      resolve();
    };
    req.on('readable', done);
    req.on('close', done);
    req.on('error', done);
  });
}

/**
 * Reads and drops what is left of a request body, up to `limit` more bytes, so that a refusal sent
 * before the body ended reaches a client still sending it: a connection closed under a client
 * mid-body is reset, and most clients then report the reset, not the answer. True when the body
 * ended (the connection can carry the next request); false when more than `limit` was left or the
 * client went away (the answer must close the connection).
 */
export function discardBody(req: IncomingMessage, limit: number): Promise<boolean> {
  if (req.readableEnded) return Promise.resolve(true);
  return new Promise((resolve) => {
    let left = limit;
    const finish = (ended: boolean) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onGone);
      req.off('error', onGone);
      req.pause();
      resolve(ended);
    };
    const onData = (chunk: Buffer) => {
      left -= chunk.length;
      if (left < 0) finish(false);
    };
    const onEnd = () => finish(true);
    const onGone = () => finish(false);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onGone);
    req.on('error', onGone);
    req.resume();
  });
}

/**
 * Puts `body` in the place of the body peekBody put back, for the engine to read instead, with a
 * Content-Length and Content-Type (its charset) to match. Synchronous, as peekBody's last step is,
 * so the stream never ends empty.
 */
export function replaceBody(req: IncomingMessage, body: Buffer, contentType: string): void {
  while (req.read() !== null);
  req.unshift(body);
  req.headers['content-type'] = contentType;
  if (req.headers['content-length'] !== undefined) req.headers['content-length'] = String(body.length);
}

/** The engine reads a body as it comes: one in a content coding is refused (isEncodedBody). */
export const unencodedBody: Middleware = async (ctx, next) => {
  if (isEncodedBody(ctx.get('Content-Encoding'))) {
    throw new HttpError(415, 'invalid_request', 'the request body is in a content coding; send it unencoded', { 'Accept-Encoding': 'identity' });
  }
  await next();
};

/**
 * A POST or PUT body sent without a Content-Type is refused as the engine refuses one of another
 * type: the engine reads such a request as having no body, and answers what is then missing (a
 * JSON registration's `redirect_uris`), which sends its developer to look in the wrong place.
 */
export function typedBody(type: string): Middleware {
  return async (ctx, next) => {
    const sent = ctx.method === 'POST' || ctx.method === 'PUT';
    const hasBody = sent && (ctx.req.headers['transfer-encoding'] !== undefined || (ctx.request.length ?? 0) > 0);
    if (hasBody && !ctx.get('Content-Type')) throw new HttpError(400, 'invalid_request', `only ${type} content-type bodies are supported on ${ctx.method} ${ctx.path}`);
    await next();
  };
}

/**
 * A form with no parameters at all (`Content-Length: 0`) is a form: the engine takes a request it
 * sees no body in as one of another type ("only application/x-www-form-urlencoded ... supported"),
 * which tells a client that sent that type nothing. Without the type the engine reads no
 * parameters, and answers what is missing: the client's authentication, or the parameter.
 */
export const emptyFormIsNoParameters: Middleware = async (ctx, next) => {
  const empty = ctx.req.headers['transfer-encoding'] === undefined && !ctx.request.length;
  if (empty && ctx.req.headers['content-type'] !== undefined && ctx.request.type === 'application/x-www-form-urlencoded') delete ctx.req.headers['content-type'];
  await next();
};
