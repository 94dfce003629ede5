/**
 * Request validation. Bodies are validated strictly (no type coercion: `cookie: "yes"` or `code: 123456`
 * are errors); query strings and path parameters are coerced from text. Unknown fields are rejected, as
 * HBP's Joi schemas did. Messages follow Joi's wording and name the field: `"email" is required`.
 */
import { Ajv, type ErrorObject } from 'ajv';
import formatsPlugin from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

/** The address rule of the database CHECK constraint (ASCII), so a valid request never fails on insert. */
export const EMAIL_PATTERN = /^[A-Za-z0-9._+%-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$/;

function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: false,
    coerceTypes: coerce ? 'array' : false,
    removeAdditional: false,
    useDefaults: true,
    strict: false,
  });
  // ajv-formats is CommonJS with a default export.
  (formatsPlugin as unknown as { default: (a: Ajv) => void }).default(ajv);
  ajv.addFormat('email', {
    type: 'string',
    validate: (s: string) => s.length <= 254 && EMAIL_PATTERN.test(s),
  });
  return ajv;
}

const strictAjv = makeAjv(false);
const coercingAjv = makeAjv(true);

type Validator = ReturnType<FastifySchemaCompiler<unknown>>;
/**
 * Compiled validators by schema text: every app built in a process (the suites build hundreds) compiles
 * the same few hundred route schemas, and ajv's own cache goes by object, which each build makes anew.
 * Schemas are plain JSON (no functions or regular expressions), so equal text is an equal schema.
 */
const validators = new Map<string, Validator>();

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const body = httpPart === 'body';
  const key = `${body ? 'strict' : 'coercing'} ${JSON.stringify(schema)}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = (body ? strictAjv : coercingAjv).compile(schema as object) as Validator;
    validators.set(key, validate);
  }
  return validate;
};

function fieldName(e: ErrorObject, extra?: string): string {
  const parts = e.instancePath.split('/').filter(Boolean);
  if (extra !== undefined) parts.push(extra);
  return parts.join('.');
}

const TYPE_WORDS: Record<string, string> = {
  boolean: 'a boolean',
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  object: 'of type object',
  array: 'an array',
  null: 'null',
};

/** One Joi-style sentence for the first validation error. `part` is body, querystring, params or headers. */
export function validationMessage(errors: readonly ErrorObject[], part: string): string {
  const e = errors[0];
  if (!e) return 'The request is not valid.';
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return `"${fieldName(e, String(p.missingProperty))}" is required`;
    case 'additionalProperties':
      return `"${fieldName(e, String(p.additionalProperty))}" is not allowed`;
    default:
      break;
  }
  const field = fieldName(e);
  if (field === '') {
    if (e.keyword === 'type')
      return `The request ${part === 'body' ? 'body' : part} must be ${TYPE_WORDS[String(p.type)] ?? String(p.type)}`;
    return `The request ${part} ${e.message ?? 'is not valid'}`;
  }
  const q = `"${field}"`;
  switch (e.keyword) {
    case 'type':
      return `${q} must be ${TYPE_WORDS[String(p.type).split(',')[0] ?? ''] ?? String(p.type)}`;
    case 'format':
      return p.format === 'email' ? `${q} must be a valid email` : `${q} must be a valid ${String(p.format)}`;
    case 'minLength':
      return Number(p.limit) === 1
        ? `${q} is not allowed to be empty`
        : `${q} length must be at least ${p.limit} characters long`;
    case 'maxLength':
      return `${q} length must be less than or equal to ${p.limit} characters long`;
    case 'minimum':
      return `${q} must be greater than or equal to ${p.limit}`;
    case 'maximum':
      return `${q} must be less than or equal to ${p.limit}`;
    case 'exclusiveMinimum':
      return `${q} must be greater than ${p.limit}`;
    case 'enum':
      return `${q} must be one of [${(p.allowedValues as unknown[]).join(', ')}]`;
    case 'const':
      return `${q} must be [${String(p.allowedValue)}]`;
    case 'pattern':
      return `${q} has an invalid format`;
    case 'minItems':
      return `${q} must contain at least ${p.limit} items`;
    case 'maxItems':
      return `${q} must contain less than or equal to ${p.limit} items`;
    case 'anyOf':
    case 'oneOf':
      return `${q} does not match any of the allowed types`;
    default:
      return `${q} ${e.message ?? 'is not valid'}`;
  }
}
