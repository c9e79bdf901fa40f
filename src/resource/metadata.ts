import { notFound } from '../shared/http_error.ts';
import { OBJECTS, type FieldDefinition, type ObjectDefinition } from './objects.ts';

/**
 * The Metadata API's view of the object types: what /rest/metadata/objects lists. Built from the
 * same definitions the Core API validates against (objects.ts), once.
 */
export function objectMetadata(object: ObjectDefinition, restPath: string) {
  return {
    id: object.namePlural,
    nameSingular: object.nameSingular,
    namePlural: object.namePlural,
    labelSingular: object.labelSingular,
    labelPlural: object.labelPlural,
    description: object.description,
    path: `${restPath}/${object.namePlural}`,
    fields: object.fields.map((field) => fieldMetadata(object, field)),
  };
}

function fieldMetadata(object: ObjectDefinition, field: FieldDefinition) {
  return {
    id: `${object.namePlural}.${field.name}`,
    name: field.name,
    label: field.label,
    type: field.type,
    description: field.description,
    required: field.required ?? false,
    readOnly: field.readOnly ?? false,
    ...(field.maxLength === undefined ? {} : { maxLength: field.maxLength }),
    ...(field.integer ? { integer: true } : {}),
    ...(field.minimum === undefined ? {} : { minimum: field.minimum }),
    ...(field.maximum === undefined ? {} : { maximum: field.maximum }),
    ...(field.target ? { relation: { targetObjectId: field.target } } : {}),
  };
}

export class MetadataApi {
  readonly #objects: ReturnType<typeof objectMetadata>[];

  constructor(restPath: string) {
    this.#objects = OBJECTS.map((object) => objectMetadata(object, restPath));
  }

  list() {
    return { data: { objects: this.#objects }, totalCount: this.#objects.length };
  }

  get(id: string) {
    const object = this.#objects.find((candidate) => candidate.id === id);
    if (!object) throw notFound(`no object with id ${id.slice(0, 64)}; objects: ${this.#objects.map((o) => o.id).join(', ')}`);
    return { data: { object } };
  }
}
