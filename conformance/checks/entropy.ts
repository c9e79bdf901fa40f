/**
 * AbstractEnsureMinimumEntropy: Shannon entropy per character times the length, the suite's
 * estimate of a credential's randomness (it asks for more than 96 bits, allowing slop below 128).
 */
export function shannonBits(value: string): number {
  const counts = new Map<string, number>();
  for (const character of value) counts.set(character, (counts.get(character) ?? 0) + 1);
  let perCharacter = 0;
  for (const count of counts.values()) {
    const p = count / value.length;
    perCharacter -= p * Math.log2(p);
  }
  return perCharacter * value.length;
}

export const MINIMUM_ENTROPY_BITS = 96;
/** EnsureMinimumAuthorizationCodeLength / RefreshTokenLength: at least 128 bits of characters. */
export const MINIMUM_LENGTH_BITS = 128;

export function lengthBits(value: string): number {
  return Buffer.byteLength(value) * 8;
}
