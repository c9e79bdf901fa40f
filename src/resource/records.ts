import { randomUUID } from 'node:crypto';

import type { DataRecord, EarlierCreate, KeyedCreate, RecordStore } from '../../adapters/store.ts';
import { HttpError, invalidRequest, notFound } from '../shared/http_error.ts';
import { IDEMPOTENCY_WINDOW_SECONDS, type IdempotentCreates } from './idempotency.ts';
import { decodeCursor, encodeCursor, pageSize } from './pagination.ts';
import { canWriteRecords, type Principal } from './principal.ts';
import { OBJECTS, objectNamed, writableFields, type ObjectDefinition } from './objects.ts';
import { recordId, validateBody, type Changes } from './validation.ts';

/** A record as the Core API shows it: system fields, then every field of its object (null when unset). */
export type RecordBody = Record<string, unknown>;

/** What a create answers: the record's id (for `Location`) and body; `replayed` when an earlier request under the same idempotency key made it. */
export interface Created {
  id: string;
  body: RecordBody;
  replayed: boolean;
}

/** A list request's page: `limit` and `starting_after` as a client gives them (the query string, a tool's arguments). */
export interface PageRequest {
  limit?: string | string[] | undefined;
  startingAfter?: string | string[] | undefined;
}

/**
 * The Core API: list, get, create, update and delete the records of one object type, always
 * within the workspace of the principal the request acts for. Another workspace's record is never
 * found: the workspace is part of every store lookup, not a check made after it. Each operation
 * gives the body the data API answers (and `/mcp` returns); a refusal is an HttpError.
 */
export class CoreApi {
  readonly #records: RecordStore;
  readonly #creates: IdempotentCreates;
  readonly #clock: () => Date;

  constructor(records: RecordStore, creates: IdempotentCreates, clock: () => Date = () => new Date()) {
    this.#records = records;
    this.#creates = creates;
    this.#clock = clock;
  }

  async list(principal: Principal, object: ObjectDefinition, request: PageRequest = {}): Promise<RecordBody> {
    const { workspaceId } = principal;
    const limit = pageSize(request.limit);
    const startingAfter = request.startingAfter;
    if (Array.isArray(startingAfter)) throw invalidRequest('give starting_after once');
    const list = { workspaceId, object: object.namePlural };
    const after = startingAfter === undefined ? 0 : decodeCursor(list, startingAfter);
    const page = await this.#records.list(workspaceId, object.namePlural, after, limit);
    const shown = await this.#present(workspaceId, object, page.records);
    const first = page.records[0];
    const last = page.records.at(-1);
    return {
      data: { [object.namePlural]: shown },
      pageInfo: {
        hasNextPage: page.hasMore,
        startCursor: first ? encodeCursor(list, first.position) : null,
        endCursor: last ? encodeCursor(list, last.position) : null,
      },
      totalCount: page.total,
    };
  }

  async get(principal: Principal, object: ObjectDefinition, requested: string): Promise<RecordBody> {
    const { workspaceId } = principal;
    const id = recordId(requested);
    const record = id ? await this.#records.get(workspaceId, object.namePlural, id) : undefined;
    if (!record) throw missing(object, requested);
    return { data: { [object.nameSingular]: (await this.#present(workspaceId, object, [record]))[0] } };
  }

  /**
   * The new record's body, and its id (for `Location`). Under an idempotency key, a create the
   * same credential made with the same key and body within the window is not made again: its
   * record is given instead, as it is now (`replayed`), before anything else about the body is
   * checked (a related record deleted since does not refuse the retry of a create that was made).
   */
  async create(principal: Principal, object: ObjectDefinition, body: unknown, idempotencyKey?: string): Promise<Created> {
    writer(principal);
    const changes = validateBody(object, body, true);
    const keyed = idempotencyKey === undefined ? undefined : this.#creates.keyed(principal, idempotencyKey, object, changes);
    if (keyed) {
      const earlier = await this.#earlier(principal.workspaceId, keyed);
      if (earlier) return this.#replay(principal, object, earlier);
    }
    await this.#checkRelations(principal.workspaceId, object, changes);
    const now = this.#clock().toISOString();
    const record = { id: randomUUID(), createdAt: now, updatedAt: now, values: changes };
    if (!keyed) return this.#created(principal, object, await this.#records.create(principal.workspaceId, object.namePlural, record), false);
    const outcome = await this.#records.createOnce(principal.workspaceId, object.namePlural, record, keyed[0]!);
    if ('created' in outcome) return this.#created(principal, object, outcome.created, false);
    // Another request under the same key made it between the look above and this write.
    return this.#replay(principal, object, { ...outcome.earlier, asked: keyed[0]!.fingerprint });
  }

  /** The create an earlier request made under one of the key's forms, with the fingerprint this request has in that form. */
  async #earlier(workspaceId: string, keyed: KeyedCreate[]): Promise<(EarlierCreate & { asked: string }) | undefined> {
    for (const { key, fingerprint } of keyed) {
      const earlier = await this.#records.earlierCreate(workspaceId, key);
      if (earlier) return { ...earlier, asked: fingerprint };
    }
    return undefined;
  }

  async #replay(principal: Principal, object: ObjectDefinition, earlier: EarlierCreate & { asked: string }): Promise<Created> {
    if (earlier.fingerprint !== earlier.asked) {
      throw new HttpError(422, 'idempotency_key_reused', `this idempotency key was sent with another request (another body or collection) within the last ${IDEMPOTENCY_WINDOW_SECONDS / 3600} hours: send a new key for a new record`);
    }
    const record = await this.#records.get(principal.workspaceId, object.namePlural, earlier.id);
    if (!record) throw new HttpError(409, 'record_deleted', `the ${object.nameSingular} this idempotency key created (id ${earlier.id}) has been deleted since`);
    return this.#created(principal, object, record, true);
  }

  async #created(principal: Principal, object: ObjectDefinition, record: DataRecord, replayed: boolean): Promise<Created> {
    return { id: record.id, body: { data: { [object.nameSingular]: (await this.#present(principal.workspaceId, object, [record]))[0] } }, replayed };
  }

  async update(principal: Principal, object: ObjectDefinition, requested: string, body: unknown): Promise<RecordBody> {
    writer(principal);
    const id = recordId(requested);
    if (!id) throw missing(object, requested);
    const changes = validateBody(object, body, false);
    await this.#checkRelations(principal.workspaceId, object, changes);
    const record = await this.#records.update(principal.workspaceId, object.namePlural, id, changes, this.#clock().toISOString());
    if (!record) throw missing(object, requested);
    return { data: { [object.nameSingular]: (await this.#present(principal.workspaceId, object, [record]))[0] } };
  }

  async delete(principal: Principal, object: ObjectDefinition, requested: string): Promise<RecordBody> {
    writer(principal);
    const id = recordId(requested);
    if (!id || !await this.#records.delete(principal.workspaceId, object.namePlural, id)) throw missing(object, requested);
    return { data: { [object.nameSingular]: { id } } };
  }

  /** A relation must name a record of its target in the same workspace. */
  async #checkRelations(workspaceId: string, object: ObjectDefinition, changes: Changes): Promise<void> {
    for (const field of writableFields(object)) {
      const value = changes[field.name];
      if (field.type !== 'RELATION' || typeof value !== 'string') continue;
      const found = await this.#records.existing(workspaceId, field.target!, [value]);
      if (!found.has(value)) throw invalidRequest(`${field.name}: no ${objectNamed(field.target!)!.nameSingular} with id ${value} in this workspace`);
    }
  }

  /**
   * Shapes records for the response. A relation whose target was deleted reads as null: record
   * ids are never reused, so this is what clearing it at the deletion would have shown, without
   * an index from every company to its people.
   */
  async #present(workspaceId: string, object: ObjectDefinition, records: DataRecord[]): Promise<RecordBody[]> {
    const live = new Map<string, Set<string>>();
    for (const field of writableFields(object)) {
      if (field.type !== 'RELATION') continue;
      const ids = [...new Set(records.map((record) => record.values[field.name]).filter((value): value is string => typeof value === 'string'))];
      live.set(field.name, await this.#records.existing(workspaceId, field.target!, ids));
    }
    return records.map((record) => {
      const body: RecordBody = { id: record.id, createdAt: record.createdAt, updatedAt: record.updatedAt };
      for (const field of writableFields(object)) {
        const value = record.values[field.name] ?? null;
        const dangling = field.type === 'RELATION' && typeof value === 'string' && !live.get(field.name)!.has(value);
        body[field.name] = dangling ? null : value;
      }
      return body;
    });
  }
}

/** Refuses a principal whose role may only read. */
function writer(principal: Principal): void {
  if (!canWriteRecords(principal)) {
    throw new HttpError(403, 'insufficient_role', 'your role in this workspace (viewer) can read records but not create, change or delete them');
  }
}

function missing(object: ObjectDefinition, id: string): HttpError {
  return notFound(`no ${object.nameSingular} with id ${id.slice(0, 64)} in this workspace`);
}

/** Every object type's plural name, for messages. */
export const OBJECT_NAMES = OBJECTS.map((object) => object.namePlural).join(', ');
