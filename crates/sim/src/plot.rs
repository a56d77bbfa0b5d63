//! PNG line charts for the reproduction (plotters' bitmap backend, pure-Rust text rendering).
//!
//! Text needs a TrueType font file: `STEADFAST_FONT` if set, otherwise DejaVu Sans from the
//! usual Debian / Fedora / Arch locations (Debian package `fonts-dejavu-core`).

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle, Palette, Palette99};

/// Axis scale; log axes plot the logarithm and label ticks with the original values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Linear.
    Linear,
    /// Base-2 logarithmic (process counts).
    Log2,
    /// Base-10 logarithmic.
    Log10,
}

impl Scale {
    fn fwd(self, v: f64) -> f64 {
        match self {
            Scale::Linear => v,
            Scale::Log2 => v.max(f64::MIN_POSITIVE).log2(),
            Scale::Log10 => v.max(f64::MIN_POSITIVE).log10(),
        }
    }

    fn label(self, v: f64) -> String {
        // Log axes are labelled at whole powers only.
        if self != Scale::Linear && (v - v.round()).abs() > 1e-9 {
            return String::new();
        }
        let x = match self {
            Scale::Linear => v,
            Scale::Log2 => v.exp2(),
            Scale::Log10 => 10f64.powf(v),
        };
        if (x - x.round()).abs() < 1e-6 * x.abs().max(1.0) {
            format!("{}", x.round())
        } else if x.abs() >= 0.01 {
            format!("{x:.2}")
        } else {
            format!("{x:.0e}")
        }
    }
}

/// One line (or point cloud) of a chart.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points `(x, y)`.
    pub points: Vec<(f64, f64)>,
    /// Dashed line.
    pub dashed: bool,
    /// Markers only, no line.
    pub scatter: bool,
    /// Shaded band `(x, low, high)`.
    pub band: Vec<(f64, f64, f64)>,
    /// Whiskers `(x, low, high)`.
    pub whiskers: Vec<(f64, f64, f64)>,
    /// Palette index (defaults to the series index).
    pub color: Option<usize>,
}

/// A chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// X scale.
    pub x_scale: Scale,
    /// Y scale.
    pub y_scale: Scale,
    /// Series.
    pub series: Vec<Series>,
    /// Vertical reference lines (data coordinates).
    pub vlines: Vec<f64>,
    /// Where the legend goes.
    pub legend: Legend,
}

/// Legend placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Legend {
    /// Top left.
    #[default]
    UpperLeft,
    /// Top right.
    UpperRight,
    /// Bottom right.
    LowerRight,
    /// Middle right.
    MiddleRight,
}

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No usable font file.
    #[error(
        "no TrueType font found for plot labels: install fonts-dejavu-core or point \
         STEADFAST_FONT to a .ttf file"
    )]
    NoFont,
    /// Drawing failed.
    #[error("drawing {path}: {msg}")]
    Draw {
        /// Output file.
        path: String,
        /// Backend message.
        msg: String,
    },
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
];

/// Registers a font for plotters once per process.
pub fn ensure_font() -> Result<(), PlotError> {
    static FONT: OnceLock<bool> = OnceLock::new();
    let ok = *FONT.get_or_init(|| {
        let candidates = std::env::var("STEADFAST_FONT")
            .ok()
            .into_iter()
            .chain(FONT_PATHS.iter().map(|s| s.to_string()));
        for path in candidates {
            if let Ok(bytes) = std::fs::read(&path) {
                // plotters keeps fonts for the life of the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::NoFont)
    }
}

/// Palette index that draws in black.
pub const BLACK_INDEX: usize = 99;

fn color(i: usize) -> RGBColor {
    if i == BLACK_INDEX {
        return BLACK;
    }
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// Draws `chart` into a PNG file of 1000×650 pixels.
pub fn draw(chart: &Chart, path: &Path) -> Result<(), PlotError> {
    ensure_font()?;
    let err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        msg: e.to_string(),
    };
    let (xs, ys) = (chart.x_scale, chart.y_scale);
    let mut xr = (f64::INFINITY, f64::NEG_INFINITY);
    let mut yr = (f64::INFINITY, f64::NEG_INFINITY);
    let mut grow = |x: f64, y: f64| {
        let (x, y) = (xs.fwd(x), ys.fwd(y));
        if x.is_finite() && y.is_finite() {
            xr = (xr.0.min(x), xr.1.max(x));
            yr = (yr.0.min(y), yr.1.max(y));
        }
    };
    for s in &chart.series {
        for &(x, y) in &s.points {
            grow(x, y);
        }
        for &(x, lo, hi) in s.band.iter().chain(&s.whiskers) {
            grow(x, lo);
            grow(x, hi);
        }
    }
    if !xr.0.is_finite() {
        xr = (0.0, 1.0);
        yr = (0.0, 1.0);
    }
    let pad = |r: (f64, f64), lin: bool| {
        let span = (r.1 - r.0).abs().max(1e-9);
        let lo = if lin && r.0 >= 0.0 {
            (r.0 - 0.05 * span).max(0.0)
        } else {
            r.0 - 0.05 * span
        };
        (lo, r.1 + 0.08 * span)
    };
    let xr = pad(xr, xs == Scale::Linear);
    let yr = pad(yr, ys == Scale::Linear);

    let root = BitMapBackend::new(path, (1000, 650)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(xr.0..xr.1, yr.0..yr.1)
        .map_err(|e| err(&e))?;
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&|v| xs.label(*v))
        .y_label_formatter(&|v| ys.label(*v))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(|e| err(&e))?;
    for &v in &chart.vlines {
        let x = xs.fwd(v);
        ctx.draw_series(std::iter::once(PathElement::new(
            vec![(x, yr.0), (x, yr.1)],
            BLACK.mix(0.4).stroke_width(1),
        )))
        .map_err(|e| err(&e))?;
    }
    for (i, s) in chart.series.iter().enumerate() {
        let c = color(s.color.unwrap_or(i));
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(x, y)| (xs.fwd(x), ys.fwd(y)))
            .collect();
        if !s.band.is_empty() {
            let mut poly: Vec<(f64, f64)> = s
                .band
                .iter()
                .map(|&(x, lo, _)| (xs.fwd(x), ys.fwd(lo)))
                .collect();
            poly.extend(
                s.band
                    .iter()
                    .rev()
                    .map(|&(x, _, hi)| (xs.fwd(x), ys.fwd(hi))),
            );
            ctx.draw_series(std::iter::once(Polygon::new(poly, c.mix(0.15).filled())))
                .map_err(|e| err(&e))?;
        }
        for &(x, lo, hi) in &s.whiskers {
            let (x, lo, hi) = (xs.fwd(x), ys.fwd(lo), ys.fwd(hi));
            let cap = (xr.1 - xr.0) * 0.006;
            ctx.draw_series([
                PathElement::new(vec![(x, lo), (x, hi)], c.stroke_width(1)),
                PathElement::new(vec![(x - cap, lo), (x + cap, lo)], c.stroke_width(1)),
                PathElement::new(vec![(x - cap, hi), (x + cap, hi)], c.stroke_width(1)),
            ])
            .map_err(|e| err(&e))?;
        }
        let legend_style = c.stroke_width(2);
        let anno = if s.scatter {
            ctx.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                .map_err(|e| err(&e))?
        } else if s.dashed {
            ctx.draw_series(DashedLineSeries::new(pts.clone(), 8, 6, c.stroke_width(2)))
                .map_err(|e| err(&e))?
        } else {
            ctx.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                .map_err(|e| err(&e))?;
            ctx.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(|e| err(&e))?
        };
        if !s.name.is_empty() {
            let anno = anno.label(s.name.as_str());
            if s.dashed {
                anno.legend(move |(x, y)| {
                    plotters::element::DashedPathElement::new(
                        vec![(x, y), (x + 22, y)],
                        5,
                        3,
                        legend_style,
                    )
                });
            } else {
                anno.legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], legend_style)
                });
            }
        }
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .position(match chart.legend {
            Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
            Legend::UpperRight => SeriesLabelPosition::UpperRight,
            Legend::LowerRight => SeriesLabelPosition::LowerRight,
            Legend::MiddleRight => SeriesLabelPosition::MiddleRight,
        })
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png_or_explains_the_missing_font() {
        let chart = Chart {
            title: "test".into(),
            x_label: "processes".into(),
            y_label: "steps".into(),
            x_scale: Scale::Log2,
            y_scale: Scale::Linear,
            series: vec![Series {
                name: "a".into(),
                points: vec![(16.0, 1.0), (32.0, 2.0), (64.0, 4.0)],
                band: vec![(16.0, 0.5, 1.5), (64.0, 3.0, 5.0)],
                whiskers: vec![(32.0, 1.0, 3.0)],
                ..Series::default()
            }],
            vlines: vec![32.0],
            legend: Legend::LowerRight,
        };
        let path = std::env::temp_dir().join(format!("steadfast-plot-{}.png", std::process::id()));
        match draw(&chart, &path) {
            Ok(()) => {
                let bytes = std::fs::read(&path).unwrap();
                assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
                let _ = std::fs::remove_file(&path);
            }
            Err(PlotError::NoFont) => {}
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn log_axes_label_whole_powers_only() {
        assert_eq!(Scale::Log2.label(10.0), "1024");
        assert_eq!(Scale::Log2.label(10.5), "");
        assert_eq!(Scale::Log10.label(-2.0), "0.01");
        assert_eq!(Scale::Linear.label(2.5), "2.50");
    }
}
