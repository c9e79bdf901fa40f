import { interactionPolicy } from 'oidc-provider';

/** The prompt OpenID Connect Core section 3.1.2.1 names for choosing the account to continue with. */
export const SELECT_ACCOUNT_PROMPT = 'select_account';

/**
 * The engine's prompts (login, then consent) after `select_account`, which the engine does not
 * have: without it `prompt=select_account`, which common client libraries send, is refused as an
 * unsupported prompt value. Requested, it shows the sign-in page (src/interactions/router.ts),
 * where the person signs in with the account of their choice; it is never asked for otherwise.
 */
export function productInteractionPolicy(): interactionPolicy.DefaultPolicy {
  const policy = interactionPolicy.base();
  policy.add(new interactionPolicy.Prompt({ name: SELECT_ACCOUNT_PROMPT, requestable: true }), 0);
  return policy;
}
