/**
 * The object types of the Core API and their fields: the one description that the Metadata API
 * publishes and the Core API validates against, so the two cannot disagree.
 */

export type FieldType = 'UUID' | 'DATE_TIME' | 'TEXT' | 'EMAIL' | 'NUMBER' | 'BOOLEAN' | 'RELATION';

export interface FieldDefinition {
  name: string;
  label: string;
  type: FieldType;
  description: string;
  /** Must be given when a record is created, and can never be null. */
  required?: boolean;
  /** Set by the server (id, times); refused in a request body. */
  readOnly?: boolean;
  /** TEXT and EMAIL: the most characters a value may have. */
  maxLength?: number;
  /** NUMBER: only whole numbers, and the smallest and largest allowed. */
  integer?: boolean;
  minimum?: number;
  maximum?: number;
  /** RELATION: the object type whose record id the value holds. */
  target?: string;
}

export interface ObjectDefinition {
  /** The object's id in the Metadata API and its path in the Core API (`/rest/<namePlural>`). */
  namePlural: string;
  nameSingular: string;
  labelSingular: string;
  labelPlural: string;
  description: string;
  fields: readonly FieldDefinition[];
}

const SYSTEM_FIELDS: readonly FieldDefinition[] = [
  { name: 'id', label: 'Id', type: 'UUID', description: 'Assigned by the server at creation', readOnly: true },
  { name: 'createdAt', label: 'Creation date', type: 'DATE_TIME', description: 'When the record was created (ISO 8601)', readOnly: true },
  { name: 'updatedAt', label: 'Last update', type: 'DATE_TIME', description: 'When the record was last changed (ISO 8601)', readOnly: true },
];

const text = (name: string, label: string, description: string, maxLength = 200, required = false): FieldDefinition =>
  ({ name, label, type: 'TEXT', description, maxLength, ...(required ? { required } : {}) });

export const OBJECTS: readonly ObjectDefinition[] = [
  {
    namePlural: 'companies',
    nameSingular: 'company',
    labelSingular: 'Company',
    labelPlural: 'Companies',
    description: 'Organisations the workspace works with',
    fields: [
      ...SYSTEM_FIELDS,
      text('name', 'Name', 'The company\'s name', 200, true),
      text('domainName', 'Domain name', 'The company\'s web domain, e.g. acme.com', 253),
      { name: 'employees', label: 'Employees', type: 'NUMBER', description: 'Number of employees', integer: true, minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
      text('city', 'City', 'Where the company is based'),
      { name: 'idealCustomerProfile', label: 'Ideal customer', type: 'BOOLEAN', description: 'Whether the company fits the ideal customer profile' },
    ],
  },
  {
    namePlural: 'people',
    nameSingular: 'person',
    labelSingular: 'Person',
    labelPlural: 'People',
    description: 'Contacts, each possibly working for a company',
    fields: [
      ...SYSTEM_FIELDS,
      text('firstName', 'First name', 'The person\'s first name', 200, true),
      text('lastName', 'Last name', 'The person\'s last name'),
      { name: 'email', label: 'Email', type: 'EMAIL', description: 'The person\'s email address', maxLength: 254 },
      text('phone', 'Phone', 'The person\'s phone number', 50),
      text('jobTitle', 'Job title', 'The person\'s role at their company'),
      text('city', 'City', 'Where the person is based'),
      { name: 'companyId', label: 'Company', type: 'RELATION', description: 'The id of the company the person works for (a record of companies in the same workspace); null when that company is deleted', target: 'companies' },
    ],
  },
];

const BY_NAME = new Map(OBJECTS.map((object) => [object.namePlural, object]));

export function objectNamed(namePlural: string): ObjectDefinition | undefined {
  return BY_NAME.get(namePlural);
}

/** The fields a request may set. */
export function writableFields(object: ObjectDefinition): FieldDefinition[] {
  return object.fields.filter((field) => !field.readOnly);
}
