import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SyncedMirror, syncedMirror } from './syncedMirror.js';

interface Target {
  refId: string;
  rawSql?: string;
  format?: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  templating: { list: Array<{ name: string; type: string; query?: string; current?: { value?: string } }> };
  panels: Panel[];
}

const dashboard = JSON.parse(
  readFileSync(new URL('../../config/grafana/review-mirror-reviews.json', import.meta.url), 'utf8'),
) as Dashboard;
const sqlTargets = dashboard.panels.flatMap((p) =>
  (p.targets ?? []).filter((t) => t.rawSql !== undefined).map((t) => ({ panel: p, target: t })),
);
const POSTGRES_PLUGINS = ['grafana-postgresql-datasource', 'postgres'];
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template literal
const DATASOURCE_REFS = ['$datasource', '${datasource}'];

// The sandbox's reviews were written between February and June 2025.
const FROM = '2025-01-01T00:00:00Z';
const TO = '2025-07-01T00:00:00Z';
const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };
const seconds = (interval: string) => {
  const m = /^'?(\d+)([smhd])'?$/.exec(interval.trim());
  if (m === null) throw new Error(`interval ${interval} not understood`);
  return Number(m[1]) * UNITS[m[2]!]!;
};

/** A panel's SQL as Grafana's PostgreSQL data source sends it (its macro expansions), for this test's range. */
function expandMacros(sql: string, schema: string): string {
  const expanded = sql
    .replaceAll(
      /\$__timeFilter\(([^)]+)\)/g,
      (_, col: string) => `${col.trim()} BETWEEN '${FROM}' AND '${TO}'`,
    )
    .replaceAll('$__timeFrom()', `'${FROM}'`)
    .replaceAll('$__timeTo()', `'${TO}'`)
    .replaceAll(
      /\$__timeGroup(Alias)?\(([^,]+),([^)]+)\)/g,
      (_, alias: string | undefined, col: string, iv: string) => {
        const s = seconds(iv);
        return `floor(extract(epoch from ${col.trim()})/${s})*${s}${alias ? ' AS "time"' : ''}`;
      },
    )
    .replaceAll(/\$\{schema\}|\$schema\b/g, schema);
  if (expanded.includes('$')) throw new Error(`unexpanded macro or variable in: ${expanded}`);
  return expanded;
}

describe('the reviews dashboard (config/grafana/review-mirror-reviews.json)', () => {
  it('picks its PostgreSQL data source through a variable, never a hard-coded uid', () => {
    const ds = dashboard.templating.list.find((v) => v.name === 'datasource');
    expect(ds?.type).toBe('datasource');
    expect(POSTGRES_PLUGINS).toContain(ds?.query);
    const refs = dashboard.panels.flatMap((p) => [
      p.datasource,
      ...(p.targets ?? []).map((t) => t.datasource),
    ]);
    for (const ref of refs.filter((r) => r !== undefined)) {
      expect(POSTGRES_PLUGINS).toContain(ref.type);
      expect(DATASOURCE_REFS).toContain(ref.uid);
    }
    const schema = dashboard.templating.list.find((v) => v.name === 'schema');
    expect(['constant', 'textbox']).toContain(schema?.type);
    expect(schema?.query).toBe('review_mirror');
  });

  it('has the panels the business asked for, each on the views', () => {
    const titles = dashboard.panels.map((p) => p.title.toLowerCase());
    for (const wanted of [
      'reviews per day',
      'average rating per month',
      'per professional',
      'per location',
      'newest reviews',
      'share of verified reviews',
    ]) {
      expect(
        titles.some((t) => t.includes(wanted)),
        wanted,
      ).toBe(true);
    }
    for (const { target } of sqlTargets) {
      expect(target.rawSql).toMatch(
        /\$schema\.(current_reviews|professional_monthly_ratings|location_monthly_ratings|freshness)\b/,
      );
      expect(target.rawSql).not.toMatch(/\$schema\.(reviews|professionals|locations)\b/);
    }
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
  });

  describe('against a synced mirror', () => {
    let mirror: SyncedMirror;
    beforeAll(async () => {
      mirror = await syncedMirror();
    }, 120_000);
    afterAll(async () => {
      await mirror?.close();
    });

    it.each(sqlTargets.map(({ panel, target }) => [panel.title, target] as const))(
      '%s: its SQL runs and returns rows',
      async (_title, target) => {
        const sql = expandMacros(target.rawSql!, mirror.db.schema);
        const { rows } = (await mirror.db.knex.raw(sql)) as { rows: Array<Record<string, unknown>> };
        expect(rows.length).toBeGreaterThan(0);
        // Not a row of nulls (an aggregate over nothing).
        expect(Object.values(rows[0]!).some((v) => v !== null)).toBe(true);
        if (target.format === 'time_series') expect(Object.keys(rows[0]!)).toContain('time');
      },
    );
  });
});
