/** The validated request bodies as the types `@simplewebauthn/server` reads, and the request's origin. */
import type {
  AuthenticationResponseJSON,
  AuthenticatorTransport,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { FastifyRequest } from 'fastify';
import { tokenFacts } from '../../jwt.ts';
import { requestClient } from '../../routes/common.ts';
import type { RequestOrigin } from '../ceremonies.ts';
import type { AuthenticationCredentialJSON, RegistrationCredentialJSON } from './schemas.ts';

/** The client of a signed-in request and its session (the `sid` its verified access token carries). */
export function signedInOrigin(request: FastifyRequest): RequestOrigin {
  return { client: requestClient(request), sessionId: tokenFacts(request.user)?.sessionId };
}

export function registrationResponse(c: RegistrationCredentialJSON): RegistrationResponseJSON {
  return {
    id: c.id,
    rawId: c.rawId,
    type: c.type,
    clientExtensionResults: {},
    response: {
      clientDataJSON: c.response.clientDataJSON,
      attestationObject: c.response.attestationObject,
      transports: c.response.transports as AuthenticatorTransport[] | undefined,
    },
  };
}

export function authenticationResponse(c: AuthenticationCredentialJSON): AuthenticationResponseJSON {
  return {
    id: c.id,
    rawId: c.rawId,
    type: c.type,
    clientExtensionResults: {},
    response: {
      clientDataJSON: c.response.clientDataJSON,
      authenticatorData: c.response.authenticatorData,
      signature: c.response.signature,
      ...(typeof c.response.userHandle === 'string' ? { userHandle: c.response.userHandle } : {}),
    },
  };
}
