import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * A table that may be wider than its card: it scrolls sideways inside the card (never the page),
 * and says so under it while some column is out of view, since a scrollbar alone is easy to miss
 * (and hidden until touched on phones). On a narrow screen the table is stacked instead (style.css:
 * table.stack), one block per row with each cell under its column's name, so nothing needs scrolling.
 */
export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  const box = useRef<HTMLDivElement>(null);
  const [wider, setWider] = useState(false);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = () => setWider(el.scrollWidth > el.clientWidth + 1);
    measure();
    const watcher = new ResizeObserver(measure);
    watcher.observe(el);
    if (el.firstElementChild) watcher.observe(el.firstElementChild);
    return () => watcher.disconnect();
  });
  return (
    <>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex lint/a11y/useSemanticElements: a table wider than the screen scrolls, so it takes focus to be scrolled by keyboard */}
      <div ref={box} class={wider ? 'table-wrap scrolls' : 'table-wrap'} tabIndex={0} role="region" aria-label={label}>
        {children}
      </div>
      {wider ? (
        <p class="hint scroll-cue" data-testid="scroll-cue">
          Scroll the table sideways to see every column →
        </p>
      ) : null}
    </>
  );
}
