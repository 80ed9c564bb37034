//go:build !sdk_broken_nocellrefresh

package sdk

const brokenNoCellRefresh = false
