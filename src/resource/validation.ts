import { showsNothing } from '../shared/hidden_characters.ts';
import { invalidRequest } from '../shared/http_error.ts';
import { writableFields, type FieldDefinition, type ObjectDefinition } from './objects.ts';

/** The changes a valid body asks for, field name -> value (null clears a field). */
export type Changes = Record<string, unknown>;

/** A UUID in either case (RFC 9562 section 4: read in any case, written in lower case). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The most problems one refusal names: a body of thousands of unknown fields gets a short answer. */
const PROBLEMS_NAMED = 20;
/** Deliberately loose (RFC 5321 allows far more than any pattern checks); catches obvious mistakes. */
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The record id `value` names, in the lower case records are stored with; undefined when it is no record id. */
export function recordId(value: unknown): string | undefined {
  return typeof value === 'string' && UUID.test(value) ? value.toLowerCase() : undefined;
}

/** The most of an unknown field's name an error repeats, as of an unknown object's or id. */
const NAME_SHOWN_MAX = 64;

/**
 * Checks a create (`creating`) or update body against the object's fields and returns the
 * changes it asks for; every problem is named in one 400, so a developer fixes them in one go.
 */
export function validateBody(object: ObjectDefinition, body: unknown, creating: boolean): Changes {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidRequest(`the body must be a JSON object of ${object.nameSingular} fields`);
  }
  const fields = new Map(object.fields.map((field) => [field.name, field]));
  const problems: string[] = [];
  const changes: Changes = {};
  for (const [name, value] of Object.entries(body)) {
    const field = fields.get(name);
    // Named as far as it can be a field's name: a 20,000-character key is not sent back whole.
    if (!field) problems.push(`${name.slice(0, NAME_SHOWN_MAX)}${name.length > NAME_SHOWN_MAX ? '...' : ''}: no such field on ${object.namePlural}`);
    else if (field.readOnly) problems.push(`${name}: set by the server, cannot be given`);
    else {
      const problem = checkValue(field, value);
      if (problem) problems.push(`${name}: ${problem}`);
      else changes[name] = field.type === 'RELATION' && value !== null ? recordId(value) : value;
    }
  }
  if (creating) {
    for (const field of writableFields(object)) {
      if (field.required && !(field.name in body)) problems.push(`${field.name}: required`);
    }
  }
  if (!creating && !Object.keys(body).length) problems.push('give at least one field to change');
  if (problems.length > PROBLEMS_NAMED) problems.splice(PROBLEMS_NAMED, Infinity, `and ${problems.length - PROBLEMS_NAMED} more`);
  if (problems.length) throw invalidRequest(problems.join('; '));
  return changes;
}

function checkValue(field: FieldDefinition, value: unknown): string | undefined {
  if (value === null) return field.required ? 'required, cannot be null' : undefined;
  switch (field.type) {
    case 'TEXT':
    case 'EMAIL': {
      if (typeof value !== 'string') return 'must be a string';
      // A lone half of a surrogate pair is no character: stored, it would break every client's JSON
      // parser that reads the record back, or any list holding it (RFC 7493 section 2.1).
      if (!value.isWellFormed()) return 'must be text: it holds half of a surrogate pair (a code unit from U+D800 to U+DFFF) with no other half';
      if (field.required && showsNothing(value)) return 'required, cannot be empty (or hold only spaces, control or invisible characters)';
      if (field.maxLength !== undefined && characters(value) > field.maxLength) return `at most ${field.maxLength} characters`;
      if (field.type === 'EMAIL' && !EMAIL.test(value)) return 'must be an email address';
      return undefined;
    }
    case 'NUMBER': {
      if (typeof value !== 'number' || !Number.isFinite(value)) return 'must be a number';
      if (field.integer && !Number.isInteger(value)) return 'must be a whole number';
      if (field.minimum !== undefined && value < field.minimum) return `must be at least ${field.minimum}`;
      if (field.maximum !== undefined && value > field.maximum) return `must be at most ${field.maximum}`;
      return undefined;
    }
    case 'BOOLEAN':
      return typeof value === 'boolean' ? undefined : 'must be true or false';
    case 'RELATION':
      return recordId(value) ? undefined : `must be the id of a record of ${field.target}`;
    default:
      return 'cannot be set';
  }
}

/** Characters as JSON Schema's maxLength counts them (code points): an emoji is one, not two UTF-16 units. */
function characters(text: string): number {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}
