import type { StoredProfessional } from '../mirror/directorySql.js';
import type { ProfessionalListItem } from '../partner-api/professionalsSchema.js';

/** Single reads older than this are refreshed, so a move to another location shows within a day. */
export const DETAIL_MAX_AGE_MS = 24 * 60 * 60 * 1000;

/**
 * Whether to read the single record for `location_id`, which list items lack (spec 2.3): when
 * the mirror has never read it, when the listed record changed or came back, when the last read
 * is older than `maxAgeMs`, or always on a full run.
 */
export function needsDetail(
  stored: StoredProfessional | undefined,
  item: ProfessionalListItem,
  options: { full: boolean; now: Date; maxAgeMs?: number },
): boolean {
  if (options.full || stored === undefined) return true;
  if (stored.detail_fetched_at === null || stored.removed_at !== null) return true;
  const age = options.now.getTime() - stored.detail_fetched_at.getTime();
  if (age > (options.maxAgeMs ?? DETAIL_MAX_AGE_MS)) return true;
  return (
    stored.slug !== item.slug ||
    stored.first_name !== item.first_name ||
    stored.last_name !== item.last_name ||
    stored.active !== item.active ||
    stored.profile_url !== item.profile_url ||
    stored.default_survey_url !== item.default_survey_url
  );
}
