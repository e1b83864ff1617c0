import type { PartnerApi } from '../../partner-api/client.js';
import { ApiRequestError } from '../../partner-api/errors.js';
import { API_PREFIX } from '../../partner-api/http.js';
import type { Location } from '../../partner-api/locationsSchema.js';
import type { Professional } from '../../partner-api/professionalsSchema.js';

type Kind = 'location' | 'professional';

/** The location of `slug`, or undefined on 404 (see `readBySlug`). */
export function readLocation(
  api: PartnerApi,
  slug: string,
  signal?: AbortSignal,
): Promise<Location | undefined> {
  return readBySlug('location', slug, () => api.locations.get(slug, signal));
}

/** The professional of `slug`, or undefined on 404 (see `readBySlug`). */
export function readProfessional(
  api: PartnerApi,
  slug: string,
  signal?: AbortSignal,
): Promise<Professional | undefined> {
  return readBySlug('professional', slug, () => api.professionals.get(slug, signal));
}

/**
 * Reads `slug` back: the record, or undefined on 404. Other failures throw (the transport has
 * already retried the GET), and then nobody can tell whether the record exists, so its row fails.
 * The answers that concern this record alone say so in its terms: the platform's own error in a
 * 200, or a redirect to another slug of its kind (a record renamed), which is not followed and is
 * no sign that REVIEWS_API_URL is wrong, as a redirect of the same path elsewhere would be.
 */
async function readBySlug<T>(kind: Kind, slug: string, read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if (!(error instanceof ApiRequestError)) throw error;
    if (error.status === 404) return undefined;
    if (error.status >= 200 && error.status <= 299) {
      throw new Error(
        `${error.route} answered ${error.status} with an error instead of the record: ${error.platformError}`,
        { cause: error },
      );
    }
    const other = redirectedSlug(error, kind, slug);
    if (other === undefined) throw error;
    throw new Error(
      `${error.route} answered ${error.status}: slug ${slug} is redirected by the platform to ${kind} slug ${other} (renamed?), not followed: if it is the same ${kind}, write slug ${other} in the file`,
      { cause: error },
    );
  }
}

/**
 * The slug a redirect of `slug`'s read leads to when it is another record of the same kind;
 * undefined when it leads anywhere else, or to the same path (the base URL moved, not the record).
 */
function redirectedSlug(error: ApiRequestError, kind: Kind, slug: string): string | undefined {
  if (error.status < 300 || error.status > 399 || error.redirectedTo === undefined) return undefined;
  let path: string;
  try {
    // Relative or absolute: only the path tells which record it names.
    path = new URL(error.redirectedTo, 'http://platform.invalid').pathname;
  } catch {
    return undefined;
  }
  const prefix = `${API_PREFIX}/${kind}s/`;
  const at = path.lastIndexOf(prefix);
  if (at < 0) return undefined;
  const segment = path.slice(at + prefix.length).replace(/\/+$/, '');
  if (segment === '' || segment.includes('/')) return undefined;
  let other: string;
  try {
    other = decodeURIComponent(segment);
  } catch {
    return undefined;
  }
  return other === slug ? undefined : other;
}
