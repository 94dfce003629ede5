/**
 * A software WebAuthn authenticator for the passkey suites: ES256 keys from node:crypto, the attestation
 * object and COSE key in CBOR (cbor-x), client data as a browser writes it. It answers the options of the
 * service as a browser and an authenticator would, and every part of the answer can be bent (origin, RP
 * ID, flags, counter, key, challenge, type) to play the attacks the suites test.
 */
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { Encoder } from 'cbor-x';

const cbor = new Encoder({ useRecords: false, mapsAsObjects: false, tagUint8Array: false });

export const FLAG_UP = 0x01;
export const FLAG_UV = 0x04;
const FLAG_BE = 0x08;
const FLAG_BS = 0x10;
const FLAG_AT = 0x40;

const b64url = (b: Uint8Array) => Buffer.from(b).toString('base64url');
const sha256 = (b: Uint8Array | string) => createHash('sha256').update(b).digest();

export interface SoftCredential {
  id: Buffer;
  key: KeyObject;
  userHandle: string;
  rpId: string;
  counter: number;
}

/** What a test may change in one answer. */
export interface Bend {
  origin?: string;
  rpId?: string;
  /** The authenticator-data flags (UP and UV by default). */
  flags?: number;
  /** The signature counter to report (default: the credential's, plus one). */
  counter?: number;
  /** Sign with this key instead of the credential's. */
  key?: KeyObject;
  challenge?: string;
  type?: string;
  /** Answer with this credential (sign-in). */
  credential?: SoftCredential;
  /** Attestation format to claim (registration). */
  fmt?: string;
  /** The credential id to claim (registration): anyone can put any id in a `none` attestation. */
  id?: Buffer;
}

interface CreationOptions {
  challenge: string;
  rp: { id?: string };
  user: { id: string };
}

interface RequestOptions {
  challenge: string;
  rpId?: string;
}

function coseKey(key: KeyObject): Buffer {
  const jwk = key.export({ format: 'jwk' });
  return cbor.encode(
    new Map<number, unknown>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, Buffer.from(jwk.x as string, 'base64url')],
      [-3, Buffer.from(jwk.y as string, 'base64url')],
    ]),
  );
}

function counterBytes(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

export class SoftAuthenticator {
  readonly credentials: SoftCredential[] = [];
  /** Counts signatures (off: reports 0 always, as synced passkeys do). */
  counts = true;

  constructor(
    readonly origin: string,
    readonly rpId: string,
  ) {}

  /** navigator.credentials.create() with the service's options: the JSON of the new credential. */
  create(options: CreationOptions, bend: Bend = {}) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const id = bend.id ?? randomBytes(32);
    const cred: SoftCredential = {
      id,
      key: privateKey,
      userHandle: options.user.id,
      rpId: options.rp.id ?? this.rpId,
      counter: 0,
    };
    const flags = (bend.flags ?? FLAG_UP | FLAG_UV) | FLAG_AT | FLAG_BE | FLAG_BS;
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(id.length);
    const authData = Buffer.concat([
      sha256(bend.rpId ?? cred.rpId),
      Buffer.from([flags]),
      counterBytes(bend.counter ?? 0),
      Buffer.alloc(16), // AAGUID: none
      idLength,
      id,
      coseKey(publicKey),
    ]);
    const attestationObject = cbor.encode(
      new Map<string, unknown>([
        ['fmt', bend.fmt ?? 'none'],
        ['attStmt', new Map()],
        ['authData', authData],
      ]),
    );
    const clientDataJSON = Buffer.from(
      JSON.stringify({
        type: bend.type ?? 'webauthn.create',
        challenge: bend.challenge ?? options.challenge,
        origin: bend.origin ?? this.origin,
        crossOrigin: false,
      }),
    );
    this.credentials.push(cred);
    return {
      credential: cred,
      json: {
        id: b64url(id),
        rawId: b64url(id),
        type: 'public-key' as const,
        clientExtensionResults: {},
        authenticatorAttachment: 'platform',
        response: {
          clientDataJSON: b64url(clientDataJSON),
          attestationObject: b64url(attestationObject),
          transports: ['internal', 'hybrid'],
        },
      },
    };
  }

  /** navigator.credentials.get() with the service's options: the JSON of the assertion. */
  get(options: RequestOptions, bend: Bend = {}) {
    const cred = bend.credential ?? this.credentials[this.credentials.length - 1];
    if (!cred) throw new Error('this authenticator holds no credential');
    const counter = bend.counter ?? (this.counts ? cred.counter + 1 : 0);
    if (bend.counter === undefined && this.counts) cred.counter = counter;
    const flags = (bend.flags ?? FLAG_UP | FLAG_UV) | FLAG_BE | FLAG_BS;
    const authData = Buffer.concat([
      sha256(bend.rpId ?? options.rpId ?? cred.rpId),
      Buffer.from([flags]),
      counterBytes(counter),
    ]);
    const clientDataJSON = Buffer.from(
      JSON.stringify({
        type: bend.type ?? 'webauthn.get',
        challenge: bend.challenge ?? options.challenge,
        origin: bend.origin ?? this.origin,
        crossOrigin: false,
      }),
    );
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), bend.key ?? cred.key);
    return {
      id: b64url(cred.id),
      rawId: b64url(cred.id),
      type: 'public-key' as const,
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
      response: {
        clientDataJSON: b64url(clientDataJSON),
        authenticatorData: b64url(authData),
        signature: b64url(signature),
        userHandle: cred.userHandle,
      },
    };
  }
}

/** A fresh ES256 private key (a signature by another key). */
export function otherKey(): KeyObject {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
}
