/** Why the quickstart stopped, in one line for the person who ran it; says whether anything was written. */
export class QuickstartError extends Error {
  override name = 'QuickstartError';
}
