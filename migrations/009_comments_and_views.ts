import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * The mirror explains itself: COMMENT ON every table and column of 001–005, the row ids 006 and
 * 007 left out, knex's own bookkeeping, and views for the questions users ask most, each commented too.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await commentTables(knex, schema);
  await createViews(knex, schema);
}

async function commentTables(knex: Knex, schema: string): Promise<void> {
  await commentOn(knex, schema, 'sync_state', {
    table:
      'One row per pull job that walks the review feed (reviews, reviews:reconcile): its watermark and, while a walk is unfinished, the checkpoint it resumes from. Written in the transaction of the page it covers.',
    columns: {
      job: 'The job: reviews (incremental sync) or reviews:reconcile (full walk that marks removals).',
      watermark:
        'Newest review created_at known to be fully mirrored; the next incremental walk reads down to it minus the overlap (SYNC_OVERLAP_SECONDS). Null before the first complete walk.',
      cursor: "The platform's page cursor of the unfinished walk; null when no walk is in progress.",
      walk_since:
        'The created_at the unfinished walk reads down to (its lower bound); null when no walk is in progress.',
      walk_started_at:
        'When the unfinished walk began; a resumed walk keeps it (the reconcile marks removed what it did not see since then). Null when no walk is in progress.',
      walk_newest:
        'Newest review created_at the unfinished walk has seen so far: becomes the watermark when it completes. Null when no walk is in progress.',
      updated_at: 'When this row was last written (after every page, and when a walk completed).',
    },
  });
  await commentOn(knex, schema, 'sync_runs', {
    table:
      "One row per run of a scheduled job or CLI sync (pull, webhook health, contacts push), written by the job runner: when it ran, how it ended and what it did. A job's last run with outcome success and a walk job is its last complete walk (see the freshness view).",
    columns: {
      id: 'Run number, increasing.',
      job: 'The job name (reviews, reviews:reconcile, locations, professionals, webhook-health, contacts:push, …), the same as the sync_job metric label.',
      started_at: 'When the run started (database clock).',
      finished_at:
        'When the run ended; null while it runs (or if its process died: see outcome interrupted).',
      outcome:
        'running, success, failed, or interrupted (its process died mid-run; marked so by the next run of the job).',
      counts:
        'What the run did, as JSON counters (pages, fetched, inserted, updated, removed, quarantined, resumed, …; each job its own).',
      error: 'For a failed run: the error text, scrubbed of secrets. Null otherwise.',
    },
  });
  await commentOn(knex, schema, 'reviews', {
    table:
      'Every review of the company the platform has shown us, through the feed (pull) or a review.created webhook, flattened from the partner API (spec 2.1). Removed ones stay, marked by removed_at; the view current_reviews lists those still public.',
    columns: {
      id: "The platform's review id.",
      review_number: 'The human-readable review number the platform shows.',
      created_at: 'When the review was written, per the platform.',
      rating: 'Star rating, 1 to 5, halves kept exactly (4.5 stays 4.5).',
      comment: "The reviewer's text; null when they wrote none.",
      is_verified: 'Whether the platform verified the reviewer (a real customer).',
      reviewer_name: "The reviewer's name; null for anonymous reviews.",
      reviewer_email:
        "The reviewer's email; null when not given. Personal data: restrict access accordingly.",
      professional_id:
        'The professional reviewed (professionals.id, no foreign key); null when the review names none.',
      professional_name: 'The professional name as written on the review; null when the review names none.',
      source:
        "How the review first reached us: feed (the poll) or webhook. Never rewritten, so source = 'feed' counts the reviews whose webhook never arrived.",
      first_seen_at: 'When the mirror first stored the review (database clock).',
      last_seen_at: 'When the feed or a webhook last returned the review.',
      feed_seen_at:
        'When the feed itself last returned the review; null if only a webhook brought it so far. The reconcile marks removed what it did not see.',
      observed_at:
        'When the platform produced the version stored (response time of the page or webhook timestamp): an older version never overwrites a newer one.',
      removed_at:
        'When a complete reconcile walk no longer found the review in the feed (suppressed or made private on the platform); null while it is public. Cleared if it comes back.',
    },
  });
  await commentOn(knex, schema, 'locations', {
    table:
      "The company's locations on the platform (spec 2.2), active and inactive, as the last complete listing returned them. Locations no longer listed stay, marked by removed_at.",
    columns: {
      id: "The platform's location id.",
      slug: "The location's slug on the platform (its URL name).",
      name: "The location's name.",
      active: 'Whether the platform lists the location as active.',
      address_line1: 'Street address, first line; null when not given.',
      address_line2: 'Street address, second line; null when not given.',
      address_city: 'City; null when not given.',
      address_state: 'State or region; null when not given.',
      address_zip: 'Postal code; null when not given.',
      profile_url: "The location's public profile page on the platform.",
      default_survey_url: 'The survey link the platform gives for this location; null until it has one.',
      created_at: 'When the location was created on the platform.',
      first_seen_at: 'When the mirror first stored it.',
      last_seen_at: 'When a listing last returned it.',
      removed_at:
        'When a complete listing (and a single read) no longer found it; null while the platform has it.',
    },
  });
  await commentOn(knex, schema, 'professionals', {
    table:
      "The company's professionals on the platform (spec 2.3), active and inactive. Reviews name them by reviews.professional_id. Professionals no longer listed stay, marked by removed_at.",
    columns: {
      id: "The platform's professional id.",
      slug: "The professional's slug on the platform (its URL name).",
      first_name: 'First name.',
      last_name: 'Last name.',
      active: 'Whether the platform lists the professional as active.',
      location_id:
        "The professional's location (locations.id, no foreign key), read from the single record: listings leave it out. Null when they have none or it was not read yet (see detail_fetched_at).",
      profile_url: "The professional's public profile page on the platform.",
      default_survey_url: 'The survey link the platform gives for this professional; null until it has one.',
      created_at: 'When the professional was created on the platform.',
      detail_fetched_at:
        'When location_id was last read from the single record; null: never (the next professionals sync reads it).',
      first_seen_at: 'When the mirror first stored them.',
      last_seen_at: 'When a listing last returned them.',
      removed_at:
        'When a complete listing (and a single read) no longer found them; null while the platform has them.',
    },
  });
  await commentOn(knex, schema, 'webhook_inbox', {
    table:
      'Every distinct webhook event the receiver accepted (signature verified), stored before it answered 2xx: for audit, dedupe and replay. A duplicate delivery adds no row.',
    columns: {
      id: 'Row number, increasing.',
      review_id: 'The review the event is about (its data.id).',
      event: 'The event type, e.g. review.created.',
      event_at: "The event's own time (the body's timestamp).",
      received_at: 'When the first delivery of the event was committed.',
      body: 'The request body exactly as signed (raw JSON text).',
    },
  });
  await commentOn(knex, schema, 'webhooks', {
    table:
      "The platform's webhooks for this company as we last knew them: those we registered (with their signing secret) and those registered elsewhere. Whoever can read signing_secret can forge deliveries.",
    columns: {
      id: "The platform's webhook id.",
      url: 'Where the platform delivers.',
      description: 'Description given at registration; null if none.',
      events: 'Event types the webhook receives.',
      signing_secret:
        'The secret the platform shows only at registration, to verify signatures; null for webhooks registered elsewhere. Sensitive.',
      created_at: 'When the platform created it; null if the platform did not say.',
      registered_at: 'When we registered it; null for webhooks registered elsewhere.',
      deleted_at: 'When we deleted it: its secret is no longer accepted. Null while in use.',
      is_active: "Whether the platform's list shows it active; null until a list was read.",
      last_error: "The platform's last delivery error for it, as its list shows; null when none.",
      checked_at:
        "When the platform's list last showed it; null if it never did. A stale value: not listed any more.",
    },
  });
  // 006 and 007 commented everything but their row numbers.
  await commentOn(knex, schema, 'review_quarantine', { columns: { id: 'Row number, increasing.' } });
  await commentOn(knex, schema, 'contact_push_log', { columns: { id: 'Row number, increasing.' } });
  await commentOn(knex, schema, 'knex_migrations', {
    table: 'The migrations applied to this schema (knex bookkeeping; review-mirror migrate writes it).',
    columns: {
      id: 'Row number.',
      name: 'The migration name (migrations/<name>.ts).',
      batch: 'The migrate run that applied it.',
      migration_time: 'When it was applied.',
    },
  });
  await commentOn(knex, schema, 'knex_migrations_lock', {
    table: "knex's migration lock (review-mirror serialises migrations with an advisory lock of its own).",
    columns: {
      index: 'Row key (a single row).',
      is_locked: '1 while a knex migration holds the lock.',
    },
  });
}

async function createViews(knex: Knex, schema: string): Promise<void> {
  const t = (name: string) => `${schema}.${name}`;
  await knex.raw(
    `create view ?? as
     select r.id, r.review_number, r.created_at, r.rating, r.comment, r.is_verified,
            r.reviewer_name, r.reviewer_email, r.professional_id,
            coalesce(p.first_name || ' ' || p.last_name, r.professional_name) as professional_name,
            p.location_id, l.name as location_name, r.source, r.first_seen_at
       from ?? r
       left join ?? p on p.id = r.professional_id
       left join ?? l on l.id = p.location_id
      where r.removed_at is null`,
    [t('current_reviews'), t('reviews'), t('professionals'), t('locations')],
  );
  await commentOn(
    knex,
    schema,
    'current_reviews',
    {
      table:
        "The reviews the platform still shows (not removed), with the name of their professional and of that professional's location.",
      columns: {
        id: "The platform's review id.",
        review_number: 'The human-readable review number.',
        created_at: 'When the review was written, per the platform.',
        rating: 'Star rating, 1 to 5.',
        comment: "The reviewer's text; null when none.",
        is_verified: 'Whether the platform verified the reviewer.',
        reviewer_name: "The reviewer's name; null for anonymous reviews.",
        reviewer_email: "The reviewer's email; null when not given.",
        professional_id: 'The professional reviewed; null when the review names none.',
        professional_name:
          'Their name as the directory has it (first and last), else as written on the review; null when the review names none.',
        location_id: "The professional's location; null when unknown or the review names no professional.",
        location_name: "That location's name; null when location_id is.",
        source: 'How the review first reached us: feed or webhook.',
        first_seen_at: 'When the mirror first stored it.',
      },
    },
    'view',
  );

  // Months are calendar months in UTC, so the result does not depend on the session's TimeZone.
  const month = `date_trunc('month', r.created_at at time zone 'UTC')::date`;
  const measures = `count(*) as reviews, avg(r.rating) as average_rating,
            count(*) filter (where r.is_verified) as verified_reviews,
            avg(case when r.is_verified then 1.0 else 0.0 end) as verified_share`;
  const measureComments = {
    month: 'The calendar month (UTC) the reviews were written in, as its first day.',
    reviews: 'Current (not removed) reviews written that month.',
    average_rating: 'Their average rating (exact numeric, 1 to 5).',
    verified_reviews: 'How many of them are verified.',
    verified_share: 'verified_reviews / reviews, from 0 to 1.',
  };
  await knex.raw(
    `create view ?? as
     select ${month} as month, r.professional_id, max(r.professional_name) as professional_name,
            ${measures}
       from ?? r
      group by 1, 2`,
    [t('professional_monthly_ratings'), t('current_reviews')],
  );
  await commentOn(
    knex,
    schema,
    'professional_monthly_ratings',
    {
      table:
        'Per professional and calendar month (UTC): how many current reviews, their average rating and the share verified. professional_id null groups the reviews that name no professional.',
      columns: {
        ...measureComments,
        professional_id: 'The professional; null for reviews that name none.',
        professional_name: 'Their name (see current_reviews.professional_name); null with professional_id.',
      },
    },
    'view',
  );
  await knex.raw(
    `create view ?? as
     select ${month} as month, r.location_id, max(r.location_name) as location_name,
            ${measures}
       from ?? r
      group by 1, 2`,
    [t('location_monthly_ratings'), t('current_reviews')],
  );
  await commentOn(
    knex,
    schema,
    'location_monthly_ratings',
    {
      table:
        "Per location (the reviewed professional's) and calendar month (UTC): how many current reviews, their average rating and the share verified. location_id null groups reviews with no professional or whose professional has no known location.",
      columns: {
        ...measureComments,
        location_id: "The reviewed professional's location; null when none or unknown.",
        location_name: "The location's name; null with location_id.",
      },
    },
    'view',
  );

  await knex.raw(
    `create view ?? as
     with walks (job) as (values ('reviews'), ('reviews:reconcile'), ('locations'), ('professionals')),
          newest as (select max(created_at) as newest_review_at from ??),
          complete as (
            select job, max(finished_at) as last_complete_walk_at
              from ?? where outcome = 'success' group by job)
     select w.job, n.newest_review_at, now() - n.newest_review_at as newest_review_age,
            c.last_complete_walk_at, now() - c.last_complete_walk_at as last_complete_walk_age
       from walks w cross join newest n left join complete c on c.job = w.job`,
    [t('freshness'), t('reviews'), t('sync_runs')],
  );
  await commentOn(
    knex,
    schema,
    'freshness',
    {
      table:
        'How fresh the mirror is: the newest review it holds and its age, and per walk job (reviews, reviews:reconcile, locations, professionals) when its last complete walk finished (its last successful run in sync_runs). One row per walk job; the review columns repeat on each.',
      columns: {
        job: 'The walk job, as in sync_runs.job.',
        newest_review_at:
          'created_at of the newest review the mirror holds (removed or not); null when empty.',
        newest_review_age:
          'now() minus newest_review_at (an interval): how far behind the platform the mirror may be.',
        last_complete_walk_at:
          'When the last successful run of the job finished, i.e. its last walk that reached the end; null if none yet.',
        last_complete_walk_age: 'now() minus last_complete_walk_at (an interval).',
      },
    },
    'view',
  );
}
