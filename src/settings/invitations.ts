import { hash, randomBytes } from 'node:crypto';

import type { ModelPayload, ModelStore, Role, Store, User, Workspace } from '../../adapters/store.ts';
import { AccountError, isRole, type Accounts } from '../accounts/accounts.ts';
import { nowSeconds, secondsUntil, systemClock, type Clock } from '../shared/clock.ts';
import { digest } from '../shared/digest.ts';
import { CreateForms, formIdOf } from './form_ids.ts';
import { noSuchRole, roleOf, type MemberRefusal } from './members.ts';

/** The store model an invitation is kept in, listed by its workspace (LISTED_BY in adapters/store.ts). */
export const INVITATION_MODEL = 'Invitation';

/**
 * How long an invitation link works: a week, long enough for someone away for a few days to find
 * it and accept, short enough that a link forwarded, pasted in a chat or left in a mailbox stops
 * working soon after it was meant to be used (Slack's and GitHub's last about as long).
 */
export const INVITATION_LIFETIME_SECONDS = 7 * 24 * 60 * 60;

/**
 * The most invitations a workspace may have pending at once. Each is a record in the store until
 * it is accepted, cancelled or expires: this bounds what a workspace's admins can make the store
 * keep, and is far more than a team invites in a week.
 */
export const MAX_PENDING_INVITATIONS = 50;

/** The link's secret: 256 random bits, base64url. */
const SECRET = /^[A-Za-z0-9_-]{43}$/;
/** An invitation's id, which the members page names it by (never its secret). */
const ID = /^inv_[A-Za-z0-9_-]{16}$/;

/** A pending invitation, as the store keeps it: never its secret, which only its link holds. Times in seconds since the epoch. */
export interface Invitation {
  id: string;
  workspaceId: string;
  role: Role;
  /** The user id of the admin who made it. */
  invitedBy: string;
  createdAt: number;
  expiresAt: number;
  /** Which of the workspace's MAX_PENDING_INVITATIONS places it holds. */
  slot: number;
}

/** A new invitation and its secret, shown once (in its link) and kept nowhere. */
export interface NewInvitation {
  invitation: Invitation;
  secret: string;
}

/** An invitation that still works, with what its page shows: the workspace, and the admin who made it. */
export interface OpenInvitation {
  invitation: Invitation;
  workspace: Workspace;
  inviter: User;
}

/** What accepting an invitation came to. */
export type Acceptance =
  | { joined: OpenInvitation }
  /** The user is a member already: nothing changed, and the invitation stays unused, for someone else. */
  | { alreadyMember: OpenInvitation; role: Role }
  /** Unknown, expired, cancelled, used, or void (its workspace gone, its inviter no longer an admin of it). */
  | { invalid: true };

interface Stored {
  /** The record's id in the store: the digest of the secret. */
  recordId: string;
  invitation: Invitation;
}

/** The invitations kept in `store`: the settings area's and the admin CLI's (which deletes a demoted admin's and a deleted workspace's). */
export function invitationsOver(store: Store, accounts: Accounts): WorkspaceInvitations {
  return new WorkspaceInvitations({ invitations: store.model(INVITATION_MODEL), marks: store.model('ReplayDetection'), accounts });
}

/**
 * Invitation links to a workspace, made by its admins in the settings area: a way to add someone
 * that tells the admin nothing of who has an account (typing an email would). The link is
 * `{issuer}/settings/invitations/<secret>`; the store keeps the invitation under the secret's
 * digest (src/shared/digest.ts), so a copy of the store holds no usable link. It works once, for
 * someone signed in with an account on this server, until it expires, and only while its workspace
 * exists and the admin who made it is an admin of it still: a removed or demoted admin's links
 * add no one, as they are deleted when that admin stops being one (voidInvitationsBy, by every
 * path that demotes or removes one), and checked at accept time as well. The membership is made through Accounts.addMember, as the admin CLI's `member add`.
 *
 * A workspace's pending invitations are bounded (MAX_PENDING_INVITATIONS), atomically on every
 * backend: each holds one of that many places, marked with the store's atomic insert
 * (ModelStore.insertNew), so creates racing for the last place cannot both take it. An invitation
 * is used up with the store's atomic consume: of two accepts racing, one adds a member.
 */
export class WorkspaceInvitations {
  readonly #invitations: ModelStore;
  /** The places invitations hold, and the marks of those used (ReplayDetection records). */
  readonly #marks: ModelStore;
  /** The create form, sent once (its marks are ReplayDetection records too). */
  readonly #forms: CreateForms;
  readonly #accounts: Accounts;
  readonly #clock: Clock;

  constructor({ invitations, marks, accounts, clock = systemClock }: { invitations: ModelStore; marks: ModelStore; accounts: Accounts; clock?: Clock }) {
    this.#invitations = invitations;
    this.#marks = marks;
    this.#forms = new CreateForms(marks, 'invitation', 'InvitationForm');
    this.#accounts = accounts;
    this.#clock = clock;
  }

  /**
   * A new invitation from the members page's form, or why none was made: a role that is not one,
   * a form without its id (shown by an earlier version), the form sent before (its first sending
   * made the invitation: a reload of the page that showed the link makes no second one), or the
   * workspace's pending invitations at their limit.
   */
  async createFromForm(workspaceId: string, invitedBy: string, body: Record<string, unknown>): Promise<NewInvitation | { refused: MemberRefusal }> {
    const role = roleOf(body.role);
    if (!role) return { refused: noSuchRole() };
    if (!formIdOf(body)) return { refused: outOfDate() };
    const pending = await this.#listed(workspaceId);
    if (pending.length >= MAX_PENDING_INVITATIONS) return { refused: tooMany() };
    const claim = await this.#forms.claim(workspaceId, body);
    if ('refused' in claim) return { refused: claim.refused === 'out_of_date' ? outOfDate() : sentBefore() };
    const created = await this.create(workspaceId, role, invitedBy, pending);
    // Refused: the form may be sent again once a place is free.
    if ('refused' in created) await claim.claimed.release();
    return created;
  }

  /** A new invitation to the workspace with `role`, made by `invitedBy` (an admin of it: the caller checked). */
  async create(workspaceId: string, role: Role, invitedBy: string, pending?: Stored[]): Promise<NewInvitation | { refused: MemberRefusal }> {
    const now = nowSeconds(this.#clock);
    const expiresAt = now + INVITATION_LIFETIME_SECONDS;
    const id = `inv_${randomBytes(12).toString('base64url')}`;
    const slot = await this.#takeSlot(workspaceId, id, expiresAt, pending ?? await this.#listed(workspaceId));
    if (slot === undefined) return { refused: tooMany() };
    const secret = randomBytes(32).toString('base64url');
    const invitation: Invitation = { id, workspaceId, role, invitedBy, createdAt: now, expiresAt, slot };
    await this.#invitations.upsert(digest(secret), { ...invitation }, secondsUntil(expiresAt, this.#clock));
    return { invitation, secret };
  }

  /** The workspace's pending invitations, oldest first. */
  async pending(workspaceId: string): Promise<Invitation[]> {
    return (await this.#listed(workspaceId)).map(({ invitation }) => invitation);
  }

  /** One of the workspace's pending invitations; undefined for one of another workspace, or none. */
  async find(workspaceId: string, id: string): Promise<Invitation | undefined> {
    return (await this.#stored(workspaceId, id))?.invitation;
  }

  /** Cancels one of the workspace's pending invitations: its link works no more. Undefined when there was none. */
  async cancel(workspaceId: string, id: string): Promise<Invitation | undefined> {
    const stored = await this.#stored(workspaceId, id);
    if (!stored) return undefined;
    await this.#invitations.destroy(stored.recordId);
    await this.#freeSlot(stored.invitation);
    return stored.invitation;
  }

  /**
   * Deletes the pending invitations `userId` made to the workspace, freeing their places: called
   * whenever they stop being an admin of it (a role change, a removal, their account deleted), so
   * that their links add no one even should they be made an admin again. How many were deleted.
   */
  async voidInvitationsBy(workspaceId: string, userId: string): Promise<number> {
    let voided = 0;
    for (const stored of await this.#listed(workspaceId)) {
      if (stored.invitation.invitedBy !== userId) continue;
      await this.#invitations.destroy(stored.recordId);
      await this.#freeSlot(stored.invitation);
      voided += 1;
    }
    return voided;
  }

  /**
   * Deletes every invitation to the workspace, and every place they held: the workspace is being
   * deleted. How many invitations were deleted (those being accepted at this moment too).
   */
  async deleteAllOf(workspaceId: string): Promise<number> {
    const listed = await this.#invitations.listBy(workspaceId);
    for (const { id } of listed) await this.#invitations.destroy(id);
    for (let slot = 0; slot < MAX_PENDING_INVITATIONS; slot += 1) await this.#marks.destroy(slotId(workspaceId, slot));
    return listed.length;
  }

  /**
   * The workspace a used link added `userId` to, when it was theirs (they accepted it) and they are
   * a member of it still: the link opened again (the back button, a second click) says so rather
   * than that it is used. Known from a mark kept under the secret's digest until the link would
   * have expired (src/shared/digest.ts): it holds no link.
   */
  async joinedWith(secret: string, userId: string): Promise<{ workspace: Workspace; role: Role } | undefined> {
    if (!SECRET.test(secret)) return undefined;
    const mark = await this.#marks.find(acceptedId(digest(secret)));
    if (mark?.userId !== userId || typeof mark.workspaceId !== 'string') return undefined;
    const [workspace, role] = await Promise.all([this.#accounts.getWorkspace(mark.workspaceId), this.#accounts.roleIn(userId, mark.workspaceId)]);
    return workspace && role ? { workspace, role } : undefined;
  }

  /** The invitation a link names, if it still works: known, not used, not expired, its workspace there and its inviter an admin of it. */
  async open(secret: string): Promise<OpenInvitation | undefined> {
    const stored = await this.#bySecret(secret);
    return stored && this.#stillValid(stored.invitation);
  }

  /**
   * Makes the user a member of the invitation's workspace with its role, and uses the invitation
   * up, once: the store's consume hands it to one caller, the others find it used.
   */
  async accept(secret: string, userId: string): Promise<Acceptance> {
    const stored = await this.#bySecret(secret);
    const open = stored && await this.#stillValid(stored.invitation);
    if (!stored || !open) return { invalid: true };
    const role = await this.#accounts.roleIn(userId, open.workspace.id);
    if (role) return { alreadyMember: open, role };
    const claim = await this.#invitations.consume(stored.recordId);
    if (!claim) return { invalid: true };
    try {
      await this.#accounts.addMember(userId, open.workspace.id, open.invitation.role);
    } catch (error) {
      // The workspace deleted meanwhile: the invitation is void.
      if (error instanceof AccountError) {
        await this.#invitations.destroy(stored.recordId);
        return { invalid: true };
      }
      // The store failing: the invitation is given back, for the person to try again.
      await this.#invitations.release(stored.recordId, claim).catch(() => undefined);
      throw error;
    }
    // Who used it, for the link opened again (joinedWith): a mark under the digest, until the link would have expired.
    await this.#marks.upsert(acceptedId(stored.recordId), { kind: 'InvitationAccepted', workspaceId: open.workspace.id, userId }, secondsUntil(open.invitation.expiresAt, this.#clock));
    await this.#invitations.destroy(stored.recordId);
    await this.#freeSlot(open.invitation);
    return { joined: open };
  }

  async #stillValid(invitation: Invitation): Promise<OpenInvitation | undefined> {
    if (invitation.expiresAt <= nowSeconds(this.#clock)) return undefined;
    const [workspace, inviter, inviterRole] = await Promise.all([
      this.#accounts.getWorkspace(invitation.workspaceId),
      this.#accounts.getUser(invitation.invitedBy),
      this.#accounts.roleIn(invitation.invitedBy, invitation.workspaceId),
    ]);
    if (!workspace || !inviter || inviterRole !== 'admin') return undefined;
    return { invitation, workspace, inviter };
  }

  async #bySecret(secret: string): Promise<Stored | undefined> {
    if (!SECRET.test(secret)) return undefined;
    const recordId = digest(secret);
    const payload = await this.#invitations.find(recordId);
    const invitation = payload && payload.consumed === undefined ? invitationOf(payload) : undefined;
    return invitation && { recordId, invitation };
  }

  async #stored(workspaceId: string, id: string): Promise<Stored | undefined> {
    if (!ID.test(id)) return undefined;
    return (await this.#listed(workspaceId)).find(({ invitation }) => invitation.id === id);
  }

  /** The workspace's invitations that are neither used nor expired, oldest first. */
  async #listed(workspaceId: string): Promise<Stored[]> {
    const now = nowSeconds(this.#clock);
    const stored: Stored[] = [];
    for (const { id, payload } of await this.#invitations.listBy(workspaceId)) {
      const invitation = payload.consumed === undefined ? invitationOf(payload) : undefined;
      if (invitation?.workspaceId === workspaceId && invitation.expiresAt > now) stored.push({ recordId: id, invitation });
    }
    return stored.sort((a, b) => a.invitation.createdAt - b.invitation.createdAt || (a.invitation.id < b.invitation.id ? -1 : 1));
  }

  /** Takes a free place of the workspace's, first those no listed invitation holds; undefined when every one is taken. */
  async #takeSlot(workspaceId: string, id: string, expiresAt: number, pending: Stored[]): Promise<number | undefined> {
    const held = new Set(pending.map(({ invitation }) => invitation.slot));
    const free = Array.from({ length: MAX_PENDING_INVITATIONS }, (_, slot) => slot).sort((a, b) => Number(held.has(a)) - Number(held.has(b)));
    for (const slot of free) {
      if (await this.#marks.insertNew(slotId(workspaceId, slot), { kind: 'InvitationSlot', invitation: id }, secondsUntil(expiresAt, this.#clock))) return slot;
    }
    return undefined;
  }

  /** Frees the place an invitation held, unless another holds it now. */
  async #freeSlot(invitation: Invitation): Promise<void> {
    const id = slotId(invitation.workspaceId, invitation.slot);
    if ((await this.#marks.find(id))?.invitation === invitation.id) await this.#marks.destroy(id);
  }
}

function slotId(workspaceId: string, slot: number): string {
  return hash('sha256', `invitation-slot\n${workspaceId}\n${slot}`, 'base64url');
}

/** The mark of an invitation's use, by its record's id (the secret's digest), digested once more. */
function acceptedId(recordId: string): string {
  return hash('sha256', `invitation-accepted\n${recordId}`, 'base64url');
}

/** The last characters of an invitation's id, which its card, its link's page and its confirmation show, to tell invitations apart (not a secret). */
export function shortId(invitation: Invitation): string {
  return invitation.id.slice(-6);
}

function invitationOf(payload: ModelPayload): Invitation | undefined {
  const { id, workspaceId, role, invitedBy, createdAt, expiresAt, slot } = payload;
  if (typeof id !== 'string' || typeof workspaceId !== 'string' || typeof role !== 'string' || !isRole(role) || typeof invitedBy !== 'string') return undefined;
  if (typeof createdAt !== 'number' || typeof expiresAt !== 'number' || typeof slot !== 'number') return undefined;
  return { id, workspaceId, role, invitedBy, createdAt, expiresAt, slot };
}

function outOfDate(): MemberRefusal {
  return { status: 400, error: 'This form is out of date: no invitation was created. Create one with the form below.' };
}

function tooMany(): MemberRefusal {
  return {
    status: 409,
    error: `No invitation was created: this workspace has ${MAX_PENDING_INVITATIONS} pending invitations, the most it may have. Cancel those no longer needed (in the list below), or wait for some to be accepted or to expire.`,
  };
}

function sentBefore(): MemberRefusal {
  return {
    status: 409,
    error: 'This form was sent before, and its first sending created an invitation: no second one was created. Its link was shown only in the answer to that first sending. '
      + 'If you did not copy it, cancel that invitation (it is in the list below) and create another.',
  };
}
