/**
 * Request and response schemas of the passkey routes: credentials in the standard JSON form that
 * browsers' `PublicKeyCredential.toJSON()` produce (WebAuthn Level 3), options as the standard
 * `PublicKeyCredential*OptionsJSON`. Sizes are bounded here, so an oversized client data or attestation
 * is a 400 before anything decodes it.
 */
import { type Static, Type } from '@sinclair/typebox';

/** A base64url string (no padding) of at most `max` characters. */
const B64 = (max: number, description: string) =>
  Type.String({ pattern: '^[A-Za-z0-9_-]*$', maxLength: max, description });

const CredentialId = B64(1366, 'The credential id, base64url (at most 1023 bytes).');
const Transports = Type.Array(Type.String({ maxLength: 32 }), { maxItems: 10 });
const ClientDataJSON = B64(8192, 'clientDataJSON, base64url.');
/** Client extension outputs: accepted and ignored (no extension is asked for). */
const Extensions = Type.Object({}, { additionalProperties: true, maxProperties: 20 });
const Attachment = Type.Optional(Type.Union([Type.String({ maxLength: 32 }), Type.Null()]));

export const RegistrationCredential = Type.Object(
  {
    id: CredentialId,
    rawId: CredentialId,
    type: Type.Literal('public-key'),
    authenticatorAttachment: Attachment,
    clientExtensionResults: Type.Optional(Extensions),
    response: Type.Object(
      {
        clientDataJSON: ClientDataJSON,
        attestationObject: B64(32768, 'The attestation object (CBOR), base64url.'),
        authenticatorData: Type.Optional(B64(16384, 'The authenticator data, base64url.')),
        transports: Type.Optional(Transports),
        publicKeyAlgorithm: Type.Optional(Type.Integer()),
        publicKey: Type.Optional(B64(4096, 'The public key (SPKI), base64url.')),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, description: 'The JSON of the new PublicKeyCredential (toJSON()).' },
);
export type RegistrationCredentialJSON = Static<typeof RegistrationCredential>;

export const AuthenticationCredential = Type.Object(
  {
    id: CredentialId,
    rawId: CredentialId,
    type: Type.Literal('public-key'),
    authenticatorAttachment: Attachment,
    clientExtensionResults: Type.Optional(Extensions),
    response: Type.Object(
      {
        clientDataJSON: ClientDataJSON,
        authenticatorData: B64(16384, 'The authenticator data, base64url.'),
        signature: B64(2048, 'The signature, base64url.'),
        userHandle: Type.Optional(Type.Union([B64(128, 'The user handle, base64url.'), Type.Null()])),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, description: 'The JSON of the PublicKeyCredential (toJSON()).' },
);
export type AuthenticationCredentialJSON = Static<typeof AuthenticationCredential>;

export const CreationOptions = Type.Object(
  {
    options: Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          'PublicKeyCredentialCreationOptionsJSON: pass to PublicKeyCredential.parseCreationOptionsFromJSON().',
      },
    ),
  },
  { additionalProperties: false },
);

export const RequestOptions = Type.Object(
  {
    options: Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          'PublicKeyCredentialRequestOptionsJSON: pass to PublicKeyCredential.parseRequestOptionsFromJSON().',
      },
    ),
  },
  { additionalProperties: false },
);

export const PasskeyName = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'A name for its owner.',
});

export const Passkey = Type.Object({
  id: Type.String({ format: 'uuid', description: 'The id of DELETE/PATCH /auth/passkeys/{id}.' }),
  credential_id: Type.String({ description: 'The WebAuthn credential id, base64url.' }),
  name: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  backed_up: Type.Boolean({ description: 'The authenticator says the passkey is backed up (synced).' }),
  transports: Type.Array(Type.String()),
});
