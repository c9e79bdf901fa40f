import type { Role } from '../../adapters/store.ts';

/** Who a data API request acts for, once its credential checked out. Every kind acts in exactly one workspace. */
export type Principal =
  /** A user's OAuth token (authorization code or refresh): limited by the user's role. */
  | { kind: 'user'; workspaceId: string; userId: string; clientId: string; role: Role }
  /** A client-credentials token: acts for the workspace the client is bound to. */
  | { kind: 'client'; workspaceId: string; clientId: string }
  /** An API key: full access to its workspace's data. */
  | { kind: 'api_key'; workspaceId: string; keyId: string };

const RANK: Record<Role, number> = { viewer: 1, member: 2, admin: 3 };

/** The lower of two roles: a token's role at issuance and the user's role now. */
export function lowerRole(a: Role, b: Role): Role {
  return RANK[a] <= RANK[b] ? a : b;
}

/** Viewers read; members and admins also create, change and delete records; workspace-level credentials do everything. */
export function canWriteRecords(principal: Principal): boolean {
  return principal.kind !== 'user' || principal.role !== 'viewer';
}

/** One rate-limit count per credential: a user's tokens for one client share it, as do a client's tokens, or an API key's requests. */
export function credentialKey(principal: Principal): string {
  switch (principal.kind) {
    case 'user': return `user:${principal.userId}:${principal.clientId}`;
    case 'client': return `client:${principal.clientId}`;
    case 'api_key': return `key:${principal.keyId}`;
  }
}
