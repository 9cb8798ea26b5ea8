#include "format/plot.h"
#include "util/afile.h"
#include "util/strbuf.h"
#include <math.h>
#include <stdio.h>

enum { PLOT_W = 640, H = 360, LEFT = 64, RIGHT = 16, TOP = 36, BOTTOM = 44, LEGEND = 300 };

static const char *colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

/* A round step for about n ticks over [lo, hi]: 1, 2 or 5 times a power of ten. */
static double tick_step(double lo, double hi, int n)
{
	double raw = (hi - lo) / n, p = pow(10, floor(log10(raw))), m = raw / p;
	return p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

/* The range of the finite values of one coordinate of all series. */
static int range(const struct series *s, int ns, int use_y, double *lo, double *hi)
{
	int any = 0;
	*lo = INFINITY, *hi = -INFINITY;
	for (int k = 0; k < ns; k++)
		for (size_t i = 0; i < s[k].n; i++) {
			double v = use_y ? s[k].y[i] : s[k].x[i];
			if (isfinite(v))
				*lo = fmin(*lo, v), *hi = fmax(*hi, v), any = 1;
		}
	/* a span too small for round ticks to step through (a constant, or one
	 * that varies in its last bits) is widened about its middle */
	double mid = (*lo + *hi) / 2, half = fmax(fabs(mid) * 0.5, 0.5);
	if (any && !(*hi - *lo > 1e-6 * fmax(fabs(*lo), fabs(*hi))))
		*lo = mid - half, *hi = mid + half;
	return any;
}

/* A text, XML-escaped. */
static void text(struct strbuf *b, const char *s)
{
	for (; *s; s++)
		if (*s == '<')
			sb_add(b, "&lt;", 4);
		else if (*s == '&')
			sb_add(b, "&amp;", 5);
		else
			sb_addc(b, *s);
}

void plot_svg(const char *path, const char *title, const char *xlabel, const struct series *s, int ns)
{
	/* more than 3 series: the legend beside the plot, not over it */
	int W = PLOT_W + (ns > 3 ? LEGEND : 0), key_x = ns > 3 ? PLOT_W + 8 : PLOT_W - RIGHT - 150;
	struct strbuf b = {0};
	sb_addf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		    "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		W, H, W, H);
	sb_addf(&b, "<text x=\"%d\" y=\"20\" font-size=\"14\">", LEFT);
	text(&b, title);
	sb_addf(&b, "</text>\n");
	double x0, x1, y0, y1;
	if (!range(s, ns, 0, &x0, &x1) || !range(s, ns, 1, &y0, &y1)) {
		sb_addf(&b, "<text x=\"%d\" y=\"%d\">no data yet</text>\n", LEFT, H / 2);
	} else {
		double pw = PLOT_W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
#define PX(v) (LEFT + ((v) - x0) / (x1 - x0) * pw)
#define PY(v) (TOP + ph - ((v) - y0) / (y1 - y0) * ph)
		sb_addf(&b, "<g stroke=\"#ccc\" fill=\"none\">\n");
		/* ticks by their index, so that rounding cannot stall them: at most a dozen */
		double dy = tick_step(y0, y1, 5), dx = tick_step(x0, x1, 6);
		double ky = ceil(y0 / dy), kx = ceil(x0 / dx);
		for (int i = 0; i < 12 && (ky + i) * dy <= y1 + dy * 1e-9; i++)
			sb_addf(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>\n", LEFT, PLOT_W - RIGHT,
				PY((ky + i) * dy), PY((ky + i) * dy));
		sb_addf(&b, "</g>\n<g text-anchor=\"end\">\n");
		for (int i = 0; i < 12 && (ky + i) * dy <= y1 + dy * 1e-9; i++) {
			double v = (ky + i) * dy;
			sb_addf(&b, "<text x=\"%d\" y=\"%.1f\">%.4g</text>\n", LEFT - 4, PY(v) + 4, fabs(v) < dy * 1e-9 ? 0 : v);
		}
		sb_addf(&b, "</g>\n<g text-anchor=\"middle\">\n");
		for (int i = 0; i < 12 && (kx + i) * dx <= x1 + dx * 1e-9; i++)
			sb_addf(&b, "<text x=\"%.1f\" y=\"%d\">%.6g</text>\n", PX((kx + i) * dx), H - BOTTOM + 16, (kx + i) * dx);
		sb_addf(&b, "<text x=\"%.1f\" y=\"%d\">", LEFT + pw / 2, H - 8);
		text(&b, xlabel);
		sb_addf(&b, "</text>\n</g>\n<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n",
			LEFT, TOP, pw, ph);
		for (int k = 0, shown = 0; k < ns; k++) {
			if (!s[k].n)
				continue;
			const char *c = colours[shown % (int)(sizeof colours / sizeof *colours)];
			sb_addf(&b, "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", c);
			for (size_t i = 0; i < s[k].n; i++)
				if (isfinite(s[k].x[i]) && isfinite(s[k].y[i]))
					sb_addf(&b, "%s%.1f,%.1f", i ? " " : "", PX(s[k].x[i]), PY(s[k].y[i]));
			sb_addf(&b, "\"/>\n");
			if (TOP + 14 + 14 * shown < H - BOTTOM) {   /* the legend, as far as it fits */
				sb_addf(&b, "<text x=\"%d\" y=\"%d\" fill=\"%s\">", key_x, TOP + 14 + 14 * shown, c);
				text(&b, s[k].name);
				sb_addf(&b, "</text>\n");
			}
			shown++;
		}
#undef PX
#undef PY
	}
	sb_addf(&b, "</svg>\n");
	struct afile *f = afile_open(path);
	afile_write(f, b.s, b.n);
	afile_commit(f);
	sb_free(&b);
}
