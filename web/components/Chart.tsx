import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

const COLORS = ['#2563eb', '#db2777', '#059669', '#d97706', '#7c3aed', '#0891b2', '#dc2626', '#4b5563'];
const AXIS_FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';

export interface ChartSeries {
  label: string;
  values: number[];
}

/** A key named under the chart, with its total over the chart's days (0 for a key that drew no line). */
export interface LegendEntry {
  label: string;
  total: number;
}

/**
 * A uPlot line chart over days (x in Unix seconds), sized to its container and redrawn on resize.
 * The y axis is as wide as its widest label (a fixed width cut "$0.00004" short), and the legend is
 * the page's own: uPlot's shows the value under the cursor, which reads "--" until one hovers, and
 * names only the keys that drew a line.
 */
export function Chart({ days, series, legend, unit }: { days: number[]; series: ChartSeries[]; legend: LegendEntry[]; unit: (v: number) => string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = () => Math.max(240, el.clientWidth);
    const axisWidth = (u: uPlot, labels: string[] | null) => {
      if (!labels?.length) return 50;
      u.ctx.font = AXIS_FONT;
      // The canvas draws at devicePixelRatio; measureText answers in CSS pixels for a CSS-pixel font.
      return Math.ceil(Math.max(...labels.map((l) => u.ctx.measureText(l).width))) + 24;
    };
    const plot = new uPlot(
      {
        width: width(),
        height: 220,
        legend: { show: false },
        scales: { x: { time: true } },
        axes: [{ font: AXIS_FONT }, { font: AXIS_FONT, values: (_u, ticks) => ticks.map(unit), size: (u, labels) => axisWidth(u, labels as string[] | null) }],
        series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, points: { show: true, size: 5 } }))],
      },
      [days, ...series.map((s) => s.values)],
      el,
    );
    const onResize = () => plot.setSize({ width: width(), height: 220 });
    window.addEventListener('resize', onResize);
    return () => {
      window.removeEventListener('resize', onResize);
      plot.destroy();
    };
  }, [days, series, unit]);
  return (
    <>
      <div ref={box} class="chart" aria-hidden="true" />
      <ul class="legend" data-testid="chart-legend" aria-label="Keys over these 30 days">
        {legend.map((entry, i) => (
          <li key={entry.label}>
            <span class="swatch" style={{ background: i < series.length ? COLORS[i % COLORS.length] : 'transparent' }} />
            {entry.label}: {entry.total ? unit(entry.total) : 'no requests'}
          </li>
        ))}
      </ul>
    </>
  );
}
