import { discoveryUrl } from './client/provider.ts';

/**
 * Whether the deployment answers at all. When nothing listens at --base-url, every module would
 * fail the same way; one line saying so is more use to the operator than a table of them.
 */
export async function unreachableReason(issuer: string): Promise<string | undefined> {
  const url = discoveryUrl(issuer);
  try {
    await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(15_000) });
    return undefined;
  } catch (error) {
    const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : '';
    return `${url} cannot be reached (${error instanceof Error ? error.message : String(error)}${cause})`;
  }
}
