/** Types of scripts/doc-blocks.mjs, for the tests that check and run the doc blocks. */
export type BlockMarker = { kind: 'runs'; test: string; id: string } | { kind: 'illustrative'; reason: string };
export interface DocBlock {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  language: string;
  runnable: boolean;
  marker: BlockMarker | null;
  text: string;
}
export declare const RUNNABLE_LANGUAGES: string[];
export declare function docFiles(root?: string): string[];
export declare function blocksIn(file: string, text: string): DocBlock[];
export declare function allBlocks(root?: string): DocBlock[];
export declare function docBlock(id: string, root?: string): string;
