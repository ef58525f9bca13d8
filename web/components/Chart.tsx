import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

const COLORS = ['#2563eb', '#db2777', '#059669', '#d97706', '#7c3aed', '#0891b2', '#dc2626', '#4b5563'];

export interface ChartSeries {
  label: string;
  values: number[];
}

/** A uPlot line chart over days (x in Unix seconds), sized to its container and redrawn on resize. */
export function Chart({ days, series, unit }: { days: number[]; series: ChartSeries[]; unit: (v: number) => string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = () => Math.max(240, el.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 220,
        legend: { show: true },
        scales: { x: { time: true } },
        axes: [{}, { values: (_u, ticks) => ticks.map(unit), size: 70 }],
        series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, points: { show: true, size: 5 }, value: (_u: uPlot, v: number | null) => (v === null ? '—' : unit(v)) }))],
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
  return <div ref={box} class="chart" aria-hidden="true" />;
}
