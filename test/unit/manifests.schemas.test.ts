/**
 * The monitoring manifests against third-party definitions: the Prometheus Operator CRD schemas
 * (as published in @kubernetes-models/prometheus-operator, generated from the operator's Go API
 * types) and the PromQL grammar of Prometheus itself (@prometheus-io/lezer-promql, the parser of
 * Prometheus' own query editor).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { parser } from '@prometheus-io/lezer-promql';
import { describe, expect, it } from 'vitest';
import { arr, findDoc, get, MANIFESTS, type Obj, promqlSelectors } from './manifests.support.js';

const COMPONENTS = join(MANIFESTS, 'components');
const rule = () => findDoc(join(COMPONENTS, 'prometheusrule'), 'PrometheusRule');
const serviceMonitor = () => findDoc(join(COMPONENTS, 'servicemonitor'), 'ServiceMonitor');

function validationError(validate: () => void): string | undefined {
  try {
    validate();
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

describe('Prometheus Operator CRD schemas', () => {
  it('the ServiceMonitor validates', () => {
    expect(validationError(() => new ServiceMonitor(serviceMonitor() as never).validate())).toBeUndefined();
  });

  it('the PrometheusRule validates', () => {
    expect(validationError(() => new PrometheusRule(rule() as never).validate())).toBeUndefined();
  });

  it('the validators reject what the CRDs reject', () => {
    const badInterval = structuredClone(serviceMonitor());
    (get(badInterval, 'spec', 'endpoints', 0) as Obj).interval = '30 seconds';
    expect(validationError(() => new ServiceMonitor(badInterval as never).validate())).toMatch(/interval/);
    const noExpr = structuredClone(rule());
    delete (get(noExpr, 'spec', 'groups', 0, 'rules', 0) as Obj).expr;
    expect(validationError(() => new PrometheusRule(noExpr as never).validate())).toMatch(/expr/);
  });
});

// ---------------------------------------------------------------------------------------------

interface Parsed {
  errors: number[];
  metrics: string[];
}

/** Parses with Prometheus' grammar: syntax error positions and the metric names of vector selectors. */
function parsePromQL(expr: string): Parsed {
  const errors: number[] = [];
  const metrics: string[] = [];
  parser.parse(expr).iterate({
    enter(n) {
      if (n.type.isError) errors.push(n.from);
      if (n.name === 'Identifier' && n.node.parent?.name === 'VectorSelector')
        metrics.push(expr.slice(n.from, n.to));
    },
  });
  return { errors, metrics };
}

function grafanaInterpolate(expr: string): string {
  return expr.replace(/\$__rate_interval|\$__interval|\$__range/g, '5m').replace(/\$\{?(\w+)\}?/g, '.*');
}

function allExprs(): { where: string; expr: string }[] {
  const out: { where: string; expr: string }[] = [];
  for (const g of arr(get(rule(), 'spec', 'groups')))
    for (const r of arr(get(g, 'rules')))
      out.push({ where: String(get(r, 'alert')), expr: String(get(r, 'expr')) });
  const d = JSON.parse(readFileSync(join(MANIFESTS, 'dashboards', 'node-lifecycle-controller.json'), 'utf8'));
  for (const p of arr(get(d, 'panels')))
    for (const t of arr(get(p, 'targets')))
      out.push({ where: `panel "${get(p, 'title')}"`, expr: grafanaInterpolate(String(get(t, 'expr'))) });
  return out;
}

describe('PromQL grammar', () => {
  it('the parser reports syntax errors', () => {
    expect(parsePromQL('sum(rate(x[5m])) by (pod)').errors).toEqual([]);
    expect(parsePromQL('sum(rate(x[5m]) by (pod)').errors.length).toBeGreaterThan(0);
    expect(parsePromQL('x{a="b"} ==').errors.length).toBeGreaterThan(0);
  });

  it('every alert and dashboard expression is valid PromQL', () => {
    const bad = allExprs().filter(({ expr }) => parsePromQL(expr).errors.length > 0);
    expect(bad).toEqual([]);
  });

  it("the unit test's scanner finds exactly the metric selectors Prometheus' parser finds", () => {
    for (const { where, expr } of allExprs()) {
      expect(
        promqlSelectors(expr).map((s) => s.metric),
        where,
      ).toEqual(parsePromQL(expr).metrics);
    }
  });
});
